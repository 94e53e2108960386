"""bf16 autocast: "auto" follows the CPU's flags and the kernels torch may use, the trainer
resolves it once and records it."""
import pytest
import torch

from flowcaps import FlowcapsError, TrainConfig, checkpoint, precision
from flowcaps import trainer as train_mod
from flowcaps.fields import parse_text
from flowcaps.losses import pair_loss
from flowcaps.model import FlowCapsules
from tests.test_flowcaps_train import TINY, tiny_config, tiny_pairs

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


@pytest.mark.parametrize("native", [True, False])
def test_auto_follows_the_cpu_and_an_explicit_setting_wins(monkeypatch, native):
    monkeypatch.setattr(precision, "cpu_computes_bf16", lambda: native)
    cpu = torch.device("cpu")
    assert precision.resolve_bf16("auto", cpu) is native
    assert precision.resolve_bf16(True, cpu) is True
    assert precision.resolve_bf16(False, cpu) is False


def test_auto_is_off_where_torch_runs_avx2_kernels_on_a_bf16_cpu(monkeypatch):
    # ATEN_CPU_CAPABILITY=avx2 and ONEDNN_MAX_CPU_ISA=AVX2 keep the flags but not the instructions
    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: True)
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    monkeypatch.delenv("DNNL_MAX_CPU_ISA", raising=False)
    cpu = torch.device("cpu")
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    assert precision.resolve_bf16("auto", cpu) is False
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    assert precision.resolve_bf16("auto", cpu) is True
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    assert precision.resolve_bf16("auto", cpu) is False
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "avx512_core_amx")
    assert precision.resolve_bf16("auto", cpu) is True
    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: False)
    assert precision.resolve_bf16("auto", cpu) is False
    assert precision.resolve_bf16(True, cpu) is True  # asked for by name, it is still on


def test_the_setting_takes_true_false_or_auto():
    assert parse_text(TrainConfig, "bf16", "true") is True
    assert parse_text(TrainConfig, "bf16", "auto") == "auto"
    TrainConfig(bf16="auto").validate()
    with pytest.raises(FlowcapsError, match="bf16 must be true, false or auto, got 'yes'"):
        TrainConfig(bf16="yes").validate()


def test_the_loss_refuses_an_unresolved_setting():
    torch.manual_seed(0)
    img = torch.rand(2, 3, 32, 32)
    with pytest.raises(FlowcapsError, match="pair_loss needs bf16 true or false"):
        pair_loss(FlowCapsules(TINY), img, img, TrainConfig(model=TINY, bf16="auto"), None)


@pytest.mark.parametrize("native", [True, False])
def test_a_run_records_the_precision_it_used(tmp_path, monkeypatch, native):
    monkeypatch.setattr(precision, "cpu_computes_bf16", lambda: native)
    cfg = tiny_config(tmp_path / "run", bf16="auto", epochs=1)
    path = train_mod.fit(cfg, tiny_pairs(16), progress=False)
    blob = checkpoint.read(path)
    assert checkpoint.meta_of(blob)["bf16"] is native
    assert checkpoint.config_of(blob).bf16 == "auto"  # the config as asked, so a resume matches
