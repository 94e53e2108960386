"""The trainer: outputs, CSV log, resumption, divergence, corrupt checkpoints and the CLI."""
import csv
import math

import numpy as np
import pytest
import torch
from click.testing import CliRunner

import flowcaps
from flowcaps import FlowcapsError, TrainConfig, checkpoint
from flowcaps import trainer as train_mod
from trainloop import ddp, progress
from flowcaps.cli import main as cli_main
from tiny_flowcaps import model_config, train_config

TINY = model_config(image_size=32, num_capsules=3, capsule_dim=8, enc_channels=(4, 8),
                    enc_hidden=16, dec_hidden=8, dec_depth=2)


def tiny_pairs(n=32, seed=0) -> np.ndarray:
    """Squares moving by a few pixels on flat backgrounds: (N, 2, 32, 32, 3) uint8."""
    rng = np.random.default_rng(seed)
    out = np.zeros((n, 2, 32, 32, 3), np.uint8)
    for i in range(n):
        out[i] = rng.integers(180, 256, 3)
        x, y = rng.integers(4, 20, 2)
        dx, dy = rng.integers(-3, 4, 2)
        col = rng.integers(0, 75, 3)
        out[i, 0, y:y + 8, x:x + 8] = col
        out[i, 1, y + dy:y + dy + 8, x + dx:x + dx + 8] = col
    return out


def tiny_config(out, **changes) -> TrainConfig:
    cfg = train_config(model=TINY, out=str(out), epochs=2, batch_size=8, lr=1e-3, points=64,
                       smooth_points=8, device="cpu", log_every=1, checkpoint_minutes=0.0)
    return cfg.replace(**changes)


def test_fit_writes_model_log_and_loads(tmp_path):
    cfg = tiny_config(tmp_path / "run")
    path = train_mod.fit(cfg, tiny_pairs(), progress=False)
    assert path.name == "model.pt"
    blob = torch.load(path, weights_only=True)  # safe loading works on the export
    assert "optimizer" not in blob
    model = flowcaps.load(path)
    assert model.config == TINY
    rows = list(csv.DictReader(open(tmp_path / "run" / "log.csv")))
    assert [int(r["step"]) for r in rows] == list(range(1, 9))  # 32 / 8 pairs x 2 epochs
    assert all(np.isfinite(float(r["loss"])) for r in rows)
    meta = checkpoint.meta_of(checkpoint.read(path))
    assert meta["step"] == 8 and meta["pairs"] == 64 and meta["stop_reason"] == "epochs"


def _weights(path):
    return checkpoint.read(path)["model"]


def test_corrupt_and_foreign_checkpoints_are_refused(tmp_path):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint at all")
    with pytest.raises(FlowcapsError, match="corrupt"):
        flowcaps.load(bad)
    torch.save({"weights": torch.zeros(2)}, tmp_path / "foreign.pt")
    with pytest.raises(FlowcapsError, match="not a flowcaps checkpoint"):
        flowcaps.load(tmp_path / "foreign.pt")
    good = train_mod.fit(tiny_config(tmp_path / "run", epochs=1), tiny_pairs(16), progress=False)
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(good.read_bytes()[:2000])
    with pytest.raises(FlowcapsError, match="corrupt"):
        flowcaps.load(truncated)


def test_fit_rejects_bad_data(tmp_path):
    with pytest.raises(FlowcapsError, match="32 px"):
        train_mod.fit(tiny_config(tmp_path, model={"image_size": 64}), tiny_pairs(), progress=False)
    with pytest.raises(FlowcapsError, match="fewer than one batch"):
        train_mod.fit(tiny_config(tmp_path, batch_size=64), tiny_pairs(), progress=False)


def test_cli_errors_are_one_line(tmp_path):
    runner = CliRunner()
    res = runner.invoke(cli_main, ["train", str(tmp_path / "missing"), "--out", str(tmp_path / "o")])
    assert res.exit_code != 0 and "not a geogen dataset" in res.output
    assert "Traceback" not in res.output
    res = runner.invoke(cli_main, ["train", str(tmp_path), "--set", "nofield=1"])
    assert res.exit_code != 0 and "unknown config field" in res.output
    res = runner.invoke(cli_main, ["train", str(tmp_path), "--config", str(tmp_path / "no.json")])
    assert res.exit_code != 0 and "cannot read config" in res.output
    (tmp_path / "bad.json").write_text("{nope")
    res = runner.invoke(cli_main, ["train", str(tmp_path), "--config", str(tmp_path / "bad.json")])
    assert res.exit_code != 0 and "not valid JSON" in res.output
    res = runner.invoke(cli_main, ["info", str(tmp_path / "missing.pt")])
    assert res.exit_code != 0 and "does not exist" in res.output


def test_prior_fades_out_and_the_extra_terms_train(tmp_path):
    """prior_anneal drives the stored prior gain to 0; the optional terms give finite losses."""
    cfg = tiny_config(tmp_path / "run", prior_anneal=0.5, w_appearance=1.0, w_slow=0.05)
    path = train_mod.fit(cfg, tiny_pairs(), progress=False)
    model = flowcaps.load(path)
    assert float(model.encoder.prior_gain) == 0.0
    rows = list(csv.DictReader(open(tmp_path / "run" / "log.csv")))
    assert all(np.isfinite(float(r[t])) and float(r[t]) > 0 for r in rows for t in ("appearance", "slow"))


def test_prior_fade_is_a_fraction_of_the_run(tmp_path):
    with pytest.raises(FlowcapsError, match="prior_anneal"):
        tiny_config(tmp_path / "run", prior_anneal=1.5).validate()


def test_init_starts_from_a_checkpoints_weights(tmp_path):
    """`init` loads another run's weights (model config must match); a resume ignores it."""
    pairs = tiny_pairs()
    base = train_mod.fit(tiny_config(tmp_path / "a"), pairs, progress=False)
    # A near-zero step keeps the weights where they started: the base's with init, the
    # seed's fresh ones without.
    tuned = train_mod.fit(tiny_config(tmp_path / "b", lr=1e-12, init=str(base)), pairs, progress=False)
    fresh = train_mod.fit(tiny_config(tmp_path / "c", lr=1e-12), pairs, progress=False)
    a, b, c = _weights(base), _weights(tuned), _weights(fresh)
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)
    assert not all(torch.allclose(a[k], c[k], atol=1e-6) for k in a)
    meta = checkpoint.meta_of(checkpoint.read(tuned))
    assert meta["init"]["path"] == str(base) and len(meta["init"]["sha256"]) == 64
    assert meta["init"]["meta"]["step"] == 8  # the base run's own record travels with it
    assert checkpoint.config_of(checkpoint.read(tuned)).init == str(base)
    with pytest.raises(FlowcapsError, match=r"another model config \(fields \['num_capsules'\]\)"):
        train_mod.fit(tiny_config(tmp_path / "d", init=str(base), model={"num_capsules": 4}),
                      pairs, progress=False)
    with pytest.raises(FlowcapsError, match="does not exist"):
        train_mod.fit(tiny_config(tmp_path / "e", init=str(tmp_path / "none.pt")), pairs, progress=False)
    base.unlink()  # resuming "b" reads its own checkpoint, not the init, and keeps its record
    again = train_mod.fit(tiny_config(tmp_path / "b", lr=1e-12, init=str(base)), pairs, progress=False)
    assert checkpoint.meta_of(checkpoint.read(again))["init"] == meta["init"]


def test_a_1x1_conv_weight_takes_the_strides_of_its_compiled_gradient():
    """DDP warns when a gradient's strides differ from its weight's, even where the memory
    order is the same (a 1x1 conv); the compiled backward gives those channels-last strides."""
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Conv2d(4, 2, 1))
    before = {k: v.clone() for k, v in net.state_dict().items()}
    ddp.match_compiled_grad_layout(net)
    assert net[1].weight.stride() == (4, 1, 4, 4)
    assert net[0].weight.stride() == (27, 9, 3, 1), "a 3x3 weight keeps its layout"
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())
