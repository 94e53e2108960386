"""bf16 autocast: an opt-in of the config, never chosen by the machine; a run records it."""
import json

import pytest

from flowcaps import FlowcapsError, PROFILES, TrainConfig, checkpoint, precision
from flowcaps import trainer as train_mod
from trainloop.configs import parse_text
from tests.test_flowcaps_train import tiny_config, tiny_pairs

CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
flags\t\t: fpu sse2 avx2 avx512f avx512_bf16 avx512_vnni
processor\t: 1
flags\t\t: fpu sse2 avx2 avx512f avx512_bf16 avx512_vnni
"""


def test_cpu_flags_are_read_from_the_first_flags_line():
    assert "avx512_bf16" in precision.cpu_flags(CPUINFO)
    assert precision.cpu_flags(CPUINFO) & precision.NATIVE_CPU_FLAGS == {"avx512_bf16"}
    assert not precision.cpu_flags("flags\t: fpu sse2 avx2\n") & precision.NATIVE_CPU_FLAGS
    assert precision.cpu_flags("model name : x\n") == frozenset()


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_every_profile_computes_in_float32(name):
    assert PROFILES[name]().bf16 is False


def test_the_setting_takes_true_or_false_only():
    assert parse_text(TrainConfig, "bf16", "true") is True
    with pytest.raises(FlowcapsError, match="bf16 must be true or false, got 'auto'"):
        TrainConfig().replace(bf16=parse_text(TrainConfig, "bf16", "auto"))


def test_an_older_config_that_let_the_machine_decide_loads_as_float32():
    raw = TrainConfig().replace(seed=3)
    blob = {**json.loads(raw.to_json()), "bf16": "auto"}
    cfg = TrainConfig.from_dict(blob)
    assert cfg.bf16 is False and cfg.loop.seed == 3


@pytest.mark.parametrize("bf16", [True, False])
def test_a_run_records_the_precision_it_used(tmp_path, bf16):
    cfg = tiny_config(tmp_path / "run", bf16=bf16, epochs=1)
    path = train_mod.fit(cfg, tiny_pairs(16), progress=False)
    blob = checkpoint.read(path)
    assert checkpoint.meta_of(blob)["bf16"] is bf16
    assert checkpoint.config_of(blob).bf16 is bf16
