"""FlowSCAE trains on part arrays; load refuses bad checkpoints (resume and the NaN stop:
tests/test_trainloop_methods.py)."""
import numpy as np
import pytest
import torch

from baselines.scae import ScaeError, checkpoint, profile, train_flowscae
from baselines.scae.trainer import fit


def _images(n=16, size=32, seed=0):
    rng = np.random.default_rng(seed)
    return torch.from_numpy(rng.integers(0, 256, size=(n, size, size, 3), dtype=np.uint8))


def _cfg(out, steps, kind="scae"):
    cfg = profile(kind, "smoke", "geo")
    if kind == "flowscae":
        cfg = cfg.replace(parts={"n_parts": 4, "n_features": 2})
    return cfg.replace(loop={"out": str(out), "steps": steps, "checkpoint_minutes": 0.0})


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
