"""`flowbench diagnose` (benchmark/methods/flowcaps_diagnose.py): the probes on hand-built cases."""
import numpy as np
import pytest
import torch
from click.testing import CliRunner

from benchmark.cli import main
from benchmark.methods.flowcaps_diagnose import (ProbePairs, capsule_table, diagnose, fit_poses,
                                                 visible_owners)
from flowcaps import FlowCapsules, checkpoint, geometry
from tiny_flowcaps import model_config, train_config

SIDE = 32


@pytest.fixture(autouse=True)
def one_thread():
    """Models this small gain nothing from a second thread, which on shared cores mostly waits."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _scene() -> ProbePairs:
    """Two images: a circle (slot 0) left and a square (slot 1) right; no triangle."""
    amodal = np.zeros((2, 3, SIDE, SIDE), bool)
    yy, xx = np.mgrid[0:SIDE, 0:SIDE]
    amodal[:, 0] = (yy - 16) ** 2 + (xx - 9) ** 2 < 36
    amodal[:, 1, 10:22, 18:30] = True
    visible = np.where(amodal[:, 0], 1, np.where(amodal[:, 1], 2, 0)).astype(np.uint8)
    present = np.array([[True, True, False]] * 2)
    return ProbePairs(images=np.zeros((2, 3, SIDE, SIDE), np.float32), amodal=amodal,
                     visible=visible, present=present)


def test_dupes_finds_two_capsules_on_one_shape_and_owners_the_one_in_front():
    pairs = _scene()
    masks = np.zeros((2, 4, SIDE, SIDE), np.float32)  # K = 4
    masks[:, 0] = masks[:, 1] = pairs.amodal[:, 0]  # capsules 0 and 1 both draw the circle
    masks[:, 2] = pairs.amodal[:, 1]  # capsule 2 the square; capsule 3 nothing
    vis = np.zeros_like(masks)
    vis[:, 1] = pairs.visible == 1  # capsule 1 is in front: it shows the circle
    vis[:, 2] = pairs.visible == 2
    table = capsule_table(masks, vis, pairs)
    assert set(table) == {"circle", "square"}  # no triangle in these images
    circle, square = table["circle"], table["square"]
    assert circle["amodal_iou"][:2] == [1.0, 1.0] and circle["amodal_iou"][3] == 0.0
    assert circle["drawn_by"] == [0, 1] and circle["second_share"] == 1.0
    assert circle["visible_iou"][0] == 0.0 and circle["visible_iou"][1] == 1.0
    assert square["drawn_by"] == [2] and square["second_share"] == 0.0
    assert square["best_share"] == [0.0, 0.0, 1.0, 0.0]
    owners = visible_owners(vis, pairs.visible)
    assert owners["circle"] == [0.0, 1.0, 0.0, 0.0] and owners["square"] == [0.0, 0.0, 1.0, 0.0]


def _disc_model(k: int = 1, side: int = SIDE) -> FlowCapsules:
    """Capsules whose mask is the decoder's fixed disc prior: Lambda > 1/2 inside radius = scale."""
    torch.manual_seed(0)
    model = FlowCapsules(model_config(image_size=side, num_capsules=k, capsule_dim=8,
                                      enc_channels=(4, 4), enc_hidden=8, dec_hidden=8,
                                      mask_prior=40.0))
    with torch.no_grad():
        model.decoder.out.weight.zero_()
    return model.eval()


def _disc(model, pose: torch.Tensor) -> torch.Tensor:
    """The disc the model draws at poses (N, 1, 4), as (N, H, W) float 0/1."""
    u = geometry.pixel_centres(SIDE, SIDE).expand(len(pose), -1, -1)
    shape = torch.zeros(len(pose), 1, model.config.shape_dim)
    with torch.no_grad():
        return (model.decoder(shape, geometry.to_canonical(pose, u))[:, 0] > 0).float().view(-1, SIDE, SIDE)


def test_fit_poses_moves_a_disc_onto_the_ground_truth():
    model = _disc_model()
    for p in model.parameters():
        p.requires_grad_(False)
    truth = torch.tensor([[[0.1, -0.2, 0.0, 0.3]], [[-0.3, 0.25, 0.0, 0.35]]])  # (N, 1, 4)
    start = truth + torch.tensor([[[-0.1, 0.08, 0.0, -0.04]], [[0.06, -0.1, 0.0, 0.03]]])
    gt = _disc(model, truth)
    shape = torch.zeros(2, 1, model.config.shape_dim)
    fitted = fit_poses(model, shape, start, gt, steps=100, lr=3e-3)
    # within a fifth of a pixel of the truth (a pixelated disc only fixes the pose that well)
    assert (fitted - truth)[..., [0, 1, 3]].abs().max() < 0.2 * 2 / SIDE
    drawn = _disc(model, fitted)
    iou = (drawn * gt).sum((1, 2)) / ((drawn + gt) > 0).sum((1, 2))
    assert float(iou.min()) > 0.97
    before = _disc(model, start)
    assert float(((before * gt).sum((1, 2)) / ((before + gt) > 0).sum((1, 2))).max()) < 0.85


def test_the_oracle_changes_nothing_where_the_encoder_is_already_right():
    """Ground truth = the model's own masks: IoU 1 before; after, the poses stay put."""
    model = _disc_model(k=3, side=64)  # discs of about 8 px radius: one pixel is 0.5% of one
    images = torch.rand(4, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    caps = model.parse(images)
    amodal = (caps.masks > 0.5).numpy()  # (4, 3, H, W): capsule s draws slot s
    visible = np.zeros((4, 64, 64), np.uint8)
    pairs = ProbePairs(images=images.numpy(), amodal=amodal, visible=visible,
                       present=np.ones((4, 3), bool))
    out = diagnose(model, pairs, ("oracle",), oracle_steps=50)
    assert out["scores"]["amodal_iou"]["all"] == 1.0
    for d in out["oracle"].values():
        # A few rim pixels whose centres lie on a disc's edge may flip (5 px of a 200 px disc).
        assert d["encoder_iou"] == 1.0 and d["fitted_iou"] > 0.975 and d["shift_px"] < 0.1
    assert all(p.requires_grad for p in model.parameters())  # the probe leaves the model as it was


def test_diagnose_command_prints_every_probe_and_refuses_bad_input(tiny_geo, tmp_path):
    cfg = train_config(model=model_config(image_size=SIDE, enc_channels=(8, 8), enc_hidden=16))
    path = checkpoint.save(tmp_path / "m.pt", cfg, FlowCapsules(cfg.model))
    runner = CliRunner()
    res = runner.invoke(main, ["diagnose", str(path), "--data", str(tiny_geo), "--pairs", "6",
                               "--oracle-steps", "5"])
    assert res.exit_code == 0, res.output
    assert "first 6 test pairs" in res.output
    for head in ("== dupes", "== owners", "== oracle"):
        assert head in res.output
    one = runner.invoke(main, ["diagnose", str(path), "--data", str(tiny_geo), "--pairs", "6",
                               "--probe", "owners"])
    assert one.exit_code == 0 and "== owners" in one.output and "== oracle" not in one.output
    missing = runner.invoke(main, ["diagnose", str(tmp_path / "none.pt"), "--data", str(tiny_geo)])
    assert missing.exit_code == 1 and "does not exist" in missing.output
    big = train_config(model=model_config(image_size=64))
    other = checkpoint.save(tmp_path / "big.pt", big, FlowCapsules(big.model))
    wrong = runner.invoke(main, ["diagnose", str(other), "--data", str(tiny_geo)])
    assert wrong.exit_code == 1 and "expects 64 px" in wrong.output
    assert "Traceback" not in missing.output + wrong.output


@pytest.mark.parametrize("bad", ["0", "x"])
def test_diagnose_pairs_must_be_a_positive_count(bad, tmp_path):
    res = CliRunner().invoke(main, ["diagnose", str(tmp_path / "m.pt"), "--pairs", bad])
    assert res.exit_code == 2 and "--pairs" in res.output


def test_diagnose_reads_the_data_the_checkpoint_was_trained_on(tiny_geo, tmp_path):
    """Not always data/geo-quick: the folder the checkpoint names, or a one-line error."""
    cfg = train_config(model=model_config(image_size=SIDE, enc_channels=(8, 8), enc_hidden=16))
    here = checkpoint.save(tmp_path / "here.pt", cfg, FlowCapsules(cfg.model),
                           meta={"data": str(tiny_geo)})
    res = CliRunner().invoke(main, ["diagnose", str(here), "--pairs", "4", "--probe", "owners"])
    assert res.exit_code == 0, res.output
    assert res.output.startswith(f"{here}: first 4 test pairs of {tiny_geo}\n")
    gone = checkpoint.save(tmp_path / "gone.pt", cfg, FlowCapsules(cfg.model),
                           meta={"data": str(tmp_path / "geoplus-quick")})
    res = CliRunner().invoke(main, ["diagnose", str(gone)])
    assert res.exit_code == 1 and res.output == (
        f"Error: {gone}: its training data {tmp_path / 'geoplus-quick'} is not on this machine; "
        f"pass --data DIR, a folder of the same dataset at {SIDE} px\n")
