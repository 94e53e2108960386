"""`flowbench bench`: FLOPs per row counted per module, the CPU's flags, the record it writes."""
import json

import pytest
from click.testing import CliRunner

from benchmark import bench, records
from benchmark.cli import main
from benchmark.registry import get_method, load_methods


def test_cpu_flags_are_read_as_whole_words():
    info = "processor\t: 0\nflags\t\t: fpu sse avx2 avx512fp16 amx_bf16\n"
    assert records.cpu_flags(info) == {"avx2": True, "avx512f": False, "avx512_bf16": False,
                                       "amx_bf16": True}
    assert records.cpu_flags("") == dict.fromkeys(records.CPU_FLAGS, False)


def test_cpu_slug():
    assert bench.cpu_slug("Intel(R) Xeon(R) Processor") == "intel-xeon"
    assert bench.cpu_slug("AMD EPYC 7B13 64-Core Processor") == "amd-epyc-7b13"


def _conv_flops(c_in, c_out, side, images):
    """Forward FLOPs of a 3x3 conv giving `side` x `side` outputs: 2 per multiply-add."""
    return 2 * 9 * c_in * c_out * side * side * images


def test_flops_per_module_follow_each_convs_side():
    """The smoke model (32 px, convs 16, 16, 32, 32) on both frames of 16 pairs: the counter
    gives each conv the FLOPs of its side."""
    sub, _ = get_method("flowcaps").bench_subjects("smoke", ())
    total, per = bench.count_flops(sub)
    images = 2 * len(sub.rows[0])
    want = {0: _conv_flops(3, 16, 32, images), 1: _conv_flops(16, 16, 16, images),
            2: _conv_flops(16, 32, 8, images), 3: _conv_flops(32, 32, 4, images)}
    for i, flops in want.items():
        assert per[f"_LossModule.model.encoder.convs.{i}"] == flops
    forward = per["_LossModule"]
    assert 2 * forward < total < 3 * forward  # backward: twice the forward, less layer 0's


@pytest.mark.parametrize("groups", [1, 8])
def test_conv_backward_is_counted_twice_its_forward(groups):
    """Input and weight gradients each cost the forward, grouped or not (torch's own formula
    counts a grouped conv's weight gradient `groups` times over)."""
    import torch
    x = torch.randn(2, 8, 12, 12, requires_grad=True)
    w = torch.randn(8, 8 // groups, 5, 5, requires_grad=True)
    with bench.flop_mode() as fwd:
        y = torch.nn.functional.conv2d(x, w, padding=2, groups=groups)
    with bench.flop_mode() as bwd:
        y.sum().backward()
    assert fwd.get_total_flops() == 2 * 25 * (8 // groups) * 8 * 144 * 2
    assert bwd.get_total_flops() == 2 * fwd.get_total_flops()


def test_smoke_bench_record(tmp_path):
    out = tmp_path / "bench.json"
    res = CliRunner().invoke(main, ["bench", "--profile", "smoke", "--steps", "1", "--method",
                                    "flowcaps", "--method", "flowscae", "--out", str(out)])
    assert res.exit_code == 0, res.output
    rec = json.loads(out.read_text())
    assert set(rec["machine"]["cpu_flags"]) == set(records.CPU_FLAGS)
    assert {"torch_cpu_capability", "ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA"} <= set(rec["machine"])
    assert [r["method"] for r in rec["rows"]] == ["flowcaps", "flowscae"]
    assert rec["settings"] == []  # no --set
    caps, ocae = rec["rows"]
    assert "as_trained" in caps and "as_trained" not in ocae
    assert caps["unit"] == "pairs" and caps["mflop_per_row"] > ocae["mflop_per_row"] > 0
    peak = rec["matmul_peak_gflop_per_s"][str(caps["threads"])]
    eager = caps["eager"]
    assert eager["fraction_of_peak"] == pytest.approx(
        caps["mflop_per_row"] * eager["rows_per_s"] / 1e3 / peak, rel=0.05)
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize("args, message", [
    (["--method", "nope"], "no bench for nope"),
    (["--set", "model.layering=wide"], "layering must be one of"),
])
def test_bad_input_is_one_line(args, message):
    res = CliRunner().invoke(main, ["bench", "--profile", "smoke", *args])
    assert res.exit_code != 0 and message in res.output and "Traceback" not in res.output


def test_every_method_has_a_smoke_bench(tmp_path):
    """Each bench subject builds its method's own training step (a changed trainer signature
    fails here, not in a user's bench run); with no --method the bench runs every one."""
    out = tmp_path / "bench.json"
    res = CliRunner().invoke(main, ["bench", "--profile", "smoke", "--steps", "1", "--out",
                                    str(out)])
    assert res.exit_code == 0, res.output
    rows = json.loads(out.read_text())["rows"]
    assert [r["method"] for r in rows] == list(bench.benched())
    assert all(r["mflop_per_row"] > 0 for r in rows)


def test_every_method_that_trains_has_a_bench_subject():
    """The bench covers every method with a training of its own (a loop case); flowcaps-refine
    has neither (it refines a trained FlowCapsules model's poses at test time)."""
    methods = load_methods()
    assert set(bench.benched()) == {n for n, m in methods.items() if m.loop_case is not None}
    assert methods["flowcaps-refine"].bench_subjects is None
