"""A training config whose step cannot fit in memory is refused in one line before any work;
the shipped profiles fit. The machine's free memory is injected: no test depends on it."""
import pytest
from click.testing import CliRunner

import flowcaps
from flowcaps import launch, memory
from flowcaps.cli import main
from flowcaps.errors import FlowcapsError
from flowcaps.profiles import PROFILES, for_data
from geogen.schema import VARIANTS

GIB = 2 ** 30


@pytest.fixture
def eight_gib(monkeypatch):
    """This machine has 8 GiB available (CPU and GPU alike), and no launch may start."""
    monkeypatch.setattr(memory, "available_cpu", lambda: 8.0 * GIB)
    monkeypatch.setattr(memory, "available_cuda", lambda: 8.0 * GIB)

    def started(*args, **kwargs):
        raise AssertionError("training was started")
    monkeypatch.setattr(launch, "launch", started)


def _files(root):
    return sorted((p.relative_to(root), p.stat().st_size) for p in root.rglob("*"))


def test_a_thousand_capsules_are_refused_in_one_line_before_any_work(tiny_geo, tmp_path,
                                                                     eight_gib):
    before = _files(tiny_geo)
    out = tmp_path / "run"
    res = CliRunner().invoke(main, ["train", str(tiny_geo), "--profile", "smoke", "--device",
                                    "cpu", "--out", str(out), "--set", "model.num_capsules=1000"])
    assert res.exit_code == 1, res.output
    assert res.output.count("\n") == 1 and "Traceback" not in res.output
    # smoke at 32 px: 16 pairs a batch, 128 points + 2 x 16 smoothness neighbours
    est = memory.estimate(for_data("smoke", "geo", image_size=32)
                          .replace(model={"num_capsules": 1000}), 1)
    assert est.total > 8 * GIB
    assert res.output == (f"Error: model.num_capsules=1000, batch_size=16, points=128 need about "
                          f"{est.total / GIB:.1f} GiB per training step (1 rank); this machine "
                          f"has 8.0 GiB available: lower model.num_capsules, batch_size or "
                          f"points\n")
    assert not out.exists() and _files(tiny_geo) == before


def test_the_refusal_follows_the_memory_available_and_the_ranks():
    cfg = PROFILES["quick"]().replace(model={"num_capsules": 1000}, device="cpu")
    est = memory.estimate(cfg, 2)  # quick trains on two CPU ranks, each half the batch
    assert est.ranks == 2 and est.total == 2 * est.per_rank
    assert est.drivers == memory.OCCLUSION  # (B, K, K, P): K squared
    with pytest.raises(FlowcapsError, match=r"\(2 ranks\); this machine has 21.3 GiB available"):
        memory.check(cfg, available=lambda kind: 21.3 * GIB)
    memory.check(cfg, available=lambda kind: est.total)  # as much as it needs: accepted
    # the decoder's width drives a softmax-layered model's estimate
    wide = cfg.replace(model={"num_capsules": 64, "layering": "softmax", "background": "uniform",
                              "dec_hidden": 4096})
    with pytest.raises(FlowcapsError, match="lower model.num_capsules, model.dec_hidden, "
                                            "model.dec_depth, batch_size or points$"):
        memory.check(wide, available=lambda kind: 8 * GIB)


# A CPU profile fits a 24 GiB machine with room to spare; the GPU profiles (gpu, and paper:
# the full grid of a 6-layer decoder, batch 64) fit a 40 GiB GPU.
FITS = {"gpu": 40, "paper": 40}


@pytest.mark.parametrize("profile", list(PROFILES))
def test_every_shipped_profile_fits_on_the_machine_it_is_for_on_every_dataset(profile):
    limit = FITS.get(profile, 16) * GIB
    for variant in VARIANTS:
        cfg = for_data(profile, variant)
        est = memory.estimate(cfg, max(cfg.cpu_ranks, 1))
        assert 0.6 * GIB < est.total < limit, (variant, est.total / GIB)
        memory.check(cfg.replace(device="cpu"), available=lambda kind: limit)


def test_the_estimate_grows_with_what_a_step_holds():
    cfg = PROFILES["quick"]().replace(cpu_ranks=1)
    base = memory.estimate(cfg, 1).per_rank
    for change in ({"model": {"num_capsules": 16}}, {"batch_size": 64}, {"points": 512},
                   {"model": {"dec_hidden": 64}}, {"model": {"image_size": 128}}):
        assert memory.estimate(cfg.replace(**change), 1).per_rank > base, change
    # "over" layering holds K of (B, K, P) tensors per point: four times the capsules, more
    # than four times their part
    k4 = memory.estimate(cfg.replace(model={"num_capsules": 32}), 1).parts[memory.OCCLUSION]
    assert k4 > 10 * memory.estimate(cfg, 1).parts[memory.OCCLUSION]


def test_reading_a_config_is_never_refused_for_memory_only_training_it(monkeypatch):
    """A config is read to score a checkpoint or plan `flowbench ablate` on any machine: only
    the start of a training asks for the memory its step needs."""
    monkeypatch.setattr(memory, "available_cpu", lambda: 1.0)
    monkeypatch.setattr(memory, "available_cuda", lambda: 1.0)
    cfg = for_data("paper", "articulated").replace(device="cpu")
    cfg.validate()  # no memory check here
    with pytest.raises(FlowcapsError, match="GiB available"):
        flowcaps.train(cfg, "no-such-data", progress=False)
