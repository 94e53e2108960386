"""The `paper` profile trains (a few steps on tiny data, and scripts/paper_gpu.sh end to end on
the CPU); the quick, long, gpu and smoke profiles compute the losses they computed before the
paper's switches came in."""
import csv
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import flowcaps
from flowcaps import trainer as train_mod
from flowcaps.losses import pair_loss
from flowcaps.model import FlowCapsules
from flowcaps.profiles import paper

ROOT = Path(__file__).resolve().parents[1]
TERMS = ("total", "render", "smooth", "center", "appearance", "slow")
# Three Adam steps of each profile at 32 px (model seed 0, pairs seed 1, draws seeded by step),
# as the code before the paper's switches (smooth_form, centroid, dec_depth 6) computed them.
BEFORE = {
    "quick": [[1.4529777, 0.1786809, 5e-07, 0.0018684, 0.4247033, 0.0],
              [1.3739541, 0.1705022, 6e-07, 0.0020109, 0.4010836, 0.0],
              [1.3511906, 0.1750707, 3.1e-06, 0.0034629, 0.3919246, 0.0]],
    "long": [[1.4529777, 0.1786809, 5e-07, 0.0018684, 0.4247033, 1.9e-06],
             [1.3739541, 0.1705022, 6e-07, 0.0020109, 0.4010836, 2.9e-06],
             [1.3511906, 0.1750707, 3.1e-06, 0.0034629, 0.3919245, 1.8e-05]],
    "smoke": [[1.6707779, 0.4856735, 5e-07, 0.001906, 0.3949713, 0.0],
              [1.7077179, 0.5133455, 9e-07, 0.0021048, 0.398054, 0.0],
              [1.6977577, 0.5015368, 8e-07, 0.0024657, 0.3986581, 0.0]],
}
BEFORE["gpu"] = BEFORE["quick"]  # one pair_loss: the batch and budget are the loop's


def _steps(name: str) -> list[list[float]]:
    cfg = flowcaps.PROFILES[name]().replace(model={"image_size": 32})
    torch.manual_seed(0)
    model = FlowCapsules(cfg.model)
    img0, img1 = torch.rand(2, 2, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    out = []
    for step in range(3):
        t = pair_loss(model, img0, img1, cfg, torch.Generator().manual_seed(step), 1.0)
        opt.zero_grad()
        t.total.backward()
        opt.step()
        out.append([float(getattr(t, f).detach()) for f in TERMS])
    return out


@pytest.mark.parametrize("name", ["quick", "long", "gpu", "smoke"])
def test_the_quick_family_computes_the_losses_it_computed_before(name):
    got = np.array(_steps(name))
    want = np.array(BEFORE[name])
    assert (got[:, 2] > 0).all()  # the smooth term is there, in pixels
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-7)


def _pairs(n=16, side=32, seed=0) -> np.ndarray:
    """Squares moving by a few pixels on flat backgrounds: (N, 2, H, W, 3) uint8."""
    rng = np.random.default_rng(seed)
    out = np.zeros((n, 2, side, side, 3), np.uint8)
    for i in range(n):
        out[i] = rng.integers(180, 256, 3)
        x, y = rng.integers(4, side - 12, 2)
        dx, dy = rng.integers(-3, 4, 2)
        out[i, 0, y:y + 8, x:x + 8] = out[i, 1, y + dy:y + dy + 8, x + dx:x + dx + 8] = 40
    return out


def test_the_paper_profile_trains_a_few_steps(tmp_path):
    """The paper's model, losses and optimiser, only smaller (32 px, narrow layers) and short."""
    cfg = paper(str(tmp_path / "run")).replace(
        model={"image_size": 32, "enc_channels": (8, 16), "enc_hidden": 32, "dec_hidden": 16},
        loop={"epochs": 2, "batch_size": 8, "threads": 1, "log_every": 1,
              "checkpoint_minutes": 0.0, "device": "cpu"})
    path = train_mod.fit(cfg, _pairs(), progress=False)
    rows = list(csv.DictReader(open(tmp_path / "run" / "log.csv")))
    assert [int(r["step"]) for r in rows] == [1, 2, 3, 4]
    assert all(np.isfinite(float(r["loss"])) and float(r["loss"]) > 0 for r in rows)
    model = flowcaps.load(path)
    assert model.config == cfg.model and model.config.dec_depth == 6  # the paper's model


def test_the_paper_gpu_script_trains_and_scores_on_the_cpu(tmp_path):
    from geogen.make import MakeConfig, make_dataset
    data = make_dataset(MakeConfig(variant="geo", n=32, val=4, test=8, size=64, seed=0,
                                   out=str(tmp_path / "geo"), workers=1, shard_size=1000),
                        progress=False)  # the paper profile's side, 64 px
    env = {**os.environ, "DATA": str(data), "OUT": str(tmp_path / "run"),
           "RESULTS": str(tmp_path / "records"), "DEVICE": "cpu", "PAIRS": "64",
           "TEST_LIMIT": "4", "TRAIN_ARGS": "--set batch_size=16", "PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    res = subprocess.run(["bash", str(ROOT / "scripts" / "paper_gpu.sh")], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert (tmp_path / "run" / "model.pt").is_file()
    records = list((tmp_path / "records").rglob("*.json"))
    assert [r.parts[-3:-1] for r in records] == [("flowcaps", "paper")]
    text = (ROOT / "scripts" / "paper_gpu.sh").read_text()
    assert "Expected time" in text and "14 hours" in text
