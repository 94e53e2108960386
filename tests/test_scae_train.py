"""Training runs resume exactly, stop on a non-finite loss, and load refuses bad checkpoints."""
import json

import numpy as np
import pytest
import torch

from baselines.scae import ScaeError, checkpoint, profile, train_flowscae
from baselines.scae import trainer
from baselines.scae.trainer import fit


def _images(n=16, size=32, seed=0):
    rng = np.random.default_rng(seed)
    return torch.from_numpy(rng.integers(0, 256, size=(n, size, size, 3), dtype=np.uint8))


def _cfg(out, steps, kind="scae"):
    cfg = profile(kind, "smoke", "geo")
    if kind == "flowscae":
        cfg = cfg.replace(parts={"n_parts": 4, "n_features": 2})
    return cfg.replace(run={"out": str(out), "max_steps": steps, "checkpoint_minutes": 0.0})


def _weights(path):
    return checkpoint.read(path)["model"]


def test_an_interrupted_run_resumes_to_the_same_weights(tmp_path):
    data = _images()
    whole = fit(_cfg(tmp_path / "a", 6), data, progress=False)
    fit(_cfg(tmp_path / "b", 3), data, progress=False)
    resumed = fit(_cfg(tmp_path / "b", 6), data, progress=False)
    a, b = _weights(whole), _weights(resumed)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    meta = checkpoint.meta_of(checkpoint.read(resumed))
    assert meta["step"] == 6 and meta["samples"] == 6 * 8
    rows = (tmp_path / "b" / "log.csv").read_text().splitlines()
    assert rows[0].startswith("step,") and len(rows) == 1 + 6 // 4  # one header, log_every 4


def test_resume_refuses_another_config(tmp_path):
    fit(_cfg(tmp_path, 2), _images(), progress=False)
    other = _cfg(tmp_path, 4).replace(optim={"lr": 1e-3})
    with pytest.raises(ScaeError, match="another config"):
        fit(other, _images(), progress=False)


def test_a_non_finite_loss_stops_and_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    real_build = trainer.build

    class Poisoned(torch.nn.Module):
        """The real model whose loss turns NaN from step 3 on."""

        def __init__(self, cfg):
            super().__init__()
            self.inner, self.calls = real_build(cfg), 0

        def loss(self, batch, gen):
            self.calls += 1
            loss, terms = self.inner.loss(batch, gen)
            return (loss * float("nan") if self.calls > 3 else loss), terms

    monkeypatch.setattr(trainer, "build", Poisoned)
    with pytest.raises(ScaeError, match="not finite at step 3"):
        fit(_cfg(tmp_path, 10), _images(), progress=False)
    progress = json.loads(checkpoint.read(tmp_path / trainer.CKPT_NAME)["progress"])
    assert progress["step"] == 3  # saved after each good step (checkpoint_minutes 0)
    assert not (tmp_path / trainer.MODEL_NAME).exists()


def test_flowscae_trains_on_part_arrays_and_loads(tmp_path):
    rng = np.random.default_rng(1)
    parts = rng.normal(size=(24, 4, 9)).astype(np.float32)
    parts[..., 6] = 1.0  # presence
    path = train_flowscae(_cfg(tmp_path, 3, "flowscae"), parts, progress=False)
    model = checkpoint.load(path)
    out = model.infer(torch.from_numpy(parts[:5]))
    assert out.posterior.shape == (5, 4) and torch.all(out.prior <= 1)
    with pytest.raises(ScaeError, match="parts must be"):
        train_flowscae(_cfg(tmp_path / "x", 3, "flowscae"), parts[:, :3], progress=False)


def test_load_refuses_missing_corrupt_and_foreign_files(tmp_path):
    with pytest.raises(ScaeError, match="does not exist"):
        checkpoint.load(tmp_path / "none.pt")
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(ScaeError, match="corrupt"):
        checkpoint.load(bad)
    foreign = tmp_path / "foreign.pt"
    torch.save({"format": "something-else"}, foreign)
    with pytest.raises(ScaeError, match="not an SCAE checkpoint"):
        checkpoint.load(foreign)
    good = fit(_cfg(tmp_path / "run", 1), _images(), progress=False)
    blob = checkpoint.read(good)
    blob["model"] = {k: v.reshape(-1)[:1] for k, v in blob["model"].items()}  # wrong shapes
    torch.save(blob, tmp_path / "mismatch.pt")
    with pytest.raises(ScaeError, match="does not match its config"):
        checkpoint.load(tmp_path / "mismatch.pt")
