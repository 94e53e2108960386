"""The FlowCapsules adapter: its one-pass predict equals the public API; ablations map to config."""
import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

from benchmark.errors import BenchmarkError
from benchmark.registry import Axes, TrainSpec, get_method
from tiny_flowcaps import model_config, train_config


def _spec(profile="smoke", **axes):
    return TrainSpec(dataset="geo", profile=profile, seed=5, data_root=Path("unused"),
                     run_dir=Path("runs/x"), image_size=32, device="cpu", variant=Axes(**axes))


def test_predict_matches_parse_and_flow():
    from flowcaps import FlowCapsules
    torch.manual_seed(0)
    model = FlowCapsules(model_config(image_size=32, num_capsules=4)).eval()
    rng = np.random.default_rng(0)
    img0, img1 = rng.random((2, 2, 3, 32, 32), dtype=np.float32)
    pred = get_method("flowcaps").predict(model, img0, img1)
    with torch.no_grad():
        caps = model.parse(torch.from_numpy(img0))
        flow = model.flow(torch.from_numpy(img0), torch.from_numpy(img1))
    assert np.allclose(pred.masks, caps.masks.numpy(), atol=1e-6)
    assert np.allclose(pred.visible, caps.visible.numpy(), atol=1e-6)
    assert np.allclose(pred.flow, flow.numpy(), atol=1e-5)
    want = torch.cat([caps.shape, caps.pose, caps.depth[..., None]], -1).flatten(1).numpy()
    assert pred.features.shape == (2, 4 * 32) and np.allclose(pred.features, want, atol=1e-6)


def test_refine_uses_the_background_its_checkpoint_was_trained_with(tmp_path):
    from flowcaps import FlowCapsules, RefineConfig, checkpoint
    method = type(get_method("flowcaps-refine"))(refine=RefineConfig(steps=3))
    rng = np.random.default_rng(0)
    img0, img1 = rng.random((2, 2, 3, 32, 32), dtype=np.float32)
    for background in ("still", "colour"):
        torch.manual_seed(0)
        cfg = train_config(model=model_config(image_size=32, num_capsules=4),
                           appearance_background=background)
        path = checkpoint.save(tmp_path / f"{background}.pt", cfg, FlowCapsules(cfg.model))
        loaded = method.load(path)
        assert loaded.config["refine"]["background"] == background
        assert loaded.model.still == (background == "still")
        # the still background is the pair's other frame: the masks depend on it
        a, b = (method.predict(loaded.model, img0, x) for x in (img1, img0))
        assert np.array_equal(a.masks, b.masks) == (background == "colour")
        assert np.array_equal(a.features, b.features)  # the encoder's, as for flowcaps


def _refined_in_two_passes(method, loaded, img0, img1):
    """flowcaps-refine as it was first written: the plain prediction, then frame 0 encoded
    again, its poses refined and its masks decoded again."""
    from flowcaps import geometry
    from flowcaps.refine import refine_poses
    net = loaded.model.net
    plain = get_method("flowcaps").predict(net, img0, img1)
    x = torch.from_numpy(img0)
    with torch.no_grad():
        shape, pose, depth = net.encode(x)
    still = torch.from_numpy(img1) if loaded.model.still else None
    pose = refine_poses(net, x, shape, pose, depth, method.refine, still)
    with torch.no_grad():
        u = geometry.pixel_centres(32, 32, "cpu").expand(len(img0), -1, -1)
        pm = net.masks_at(shape, pose, depth, u)
    return dataclasses.replace(plain, masks=pm.masks.view(len(img0), -1, 32, 32).numpy(),
                               visible=pm.visible.view(len(img0), -1, 32, 32).numpy())


# The paper's model, and the quick profile's (heat-map translation, one shape code per capsule,
# front-to-back compositing over a static background).
FAMILIES = {"paper": dict(translation_head="fc", background="uniform", depth_init=4.0,
                          depth_min=0.0),
            "quick": dict(translation_head="softargmax", pooled_params=True, shape_code="capsule",
                          layering="over", background="static", depth_init=10.0, depth_min=8.0)}


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("background", ["still", "colour"])
def test_refine_in_one_pass_equals_the_two_pass_prediction(tmp_path, background, family):
    from flowcaps import FlowCapsules, ModelConfig, RefineConfig, TrainConfig, checkpoint
    method = type(get_method("flowcaps-refine"))(refine=RefineConfig(steps=4, points=64))
    torch.manual_seed(1)
    model = ModelConfig(image_size=32, num_capsules=3, capsule_dim=8, enc_channels=(4, 8),
                        enc_hidden=16, dec_hidden=8, **FAMILIES[family])
    cfg = TrainConfig(model=model, appearance_background=background)
    loaded = method.load(checkpoint.save(tmp_path / "m.pt", cfg, FlowCapsules(cfg.model)))
    img0, img1 = np.random.default_rng(2).random((2, 3, 3, 32, 32), dtype=np.float32)
    got = method.predict(loaded.model, img0, img1)
    want = _refined_in_two_passes(method, loaded, img0, img1)
    plain = get_method("flowcaps").predict(loaded.model.net, img0, img1)
    assert not np.array_equal(got.masks, plain.masks)  # the refinement moved the masks
    # Close, not bitwise: on some CPU kinds (the AMD EPYC with avx512_bf16) the two passes'
    # different batch shapes take kernels that sum in another order.
    for name in ("masks", "visible", "flow", "features"):
        np.testing.assert_allclose(getattr(got, name), getattr(want, name), rtol=1e-5,
                                   atol=1e-6, err_msg=name)


def test_ablation_axes_map_to_model_config():
    method = get_method("flowcaps")
    cfg = method.config(_spec(num_capsules=4, shape_dim=3, decoder_depth=6, depth_ordering=False))
    model = cfg["model"]
    assert (model["num_capsules"], model["capsule_dim"], model["dec_depth"],
            model["depth_ordering"], model["image_size"]) == (4, 8, 6, False, 32)
    loop = cfg["loop"]
    assert (loop["seed"], loop["out"], loop["device"]) == (5, "runs/x", "cpu")
    assert method.config(_spec())["model"]["num_capsules"] == 8  # the paper's default K


def test_unknown_profile_and_bad_variant_are_clear_errors():
    method = get_method("flowcaps")
    with pytest.raises(BenchmarkError, match="no profile 'huge'"):
        method.config(_spec(profile="huge"))
    with pytest.raises(BenchmarkError, match="flowcaps config"):
        method.config(_spec(num_capsules=0))


def test_geoplus_runs_train_on_geo_first_then_both(tmp_path):
    """A geo+ spec carrying Geo's folder trains with it (mix_data, Geo alone at first) and with
    the encoder's GroupNorm, as flowcaps.profiles says for geo+ data; a geo spec trains on its
    own pairs with the profile's encoder; a geo+ spec without Geo's folder (a checkpoint's
    evaluation) has a config to read but none to train."""
    from flowcaps.profiles import BY_VARIANT, MIX_WITH
    method = get_method("flowcaps")
    assert method.trains_with == {"geo+": ("geo",)} == {d: (m,) for d, m in MIX_WITH.items()}
    spec = dataclasses.replace(_spec(), dataset="geo+", extra_data={"geo": Path("data/geo-smoke")})
    cfg = method.config(spec)
    mix_first, enc_norm = BY_VARIANT["geo+"]["mix_first"][0], BY_VARIANT["geo+"]["model.enc_norm"][0]
    assert (cfg["mix_data"], cfg["mix_first"]) == ("data/geo-smoke", mix_first) == (
        "data/geo-smoke", 0.35)
    assert cfg["model"]["enc_norm"] == enc_norm == 8
    plain = method.config(_spec())
    assert (plain["mix_data"], plain["mix_first"]) == (None, 0.0)
    assert plain["model"]["enc_norm"] == 0
    alone = dataclasses.replace(spec, extra_data={}, run_dir=tmp_path / "run")
    assert method.axes(alone) == method.axes(spec)
    with pytest.raises(BenchmarkError, match="needs mix_data"):
        method.train(alone)
    assert not (tmp_path / "run").exists()
    # Table 3's variants of a geo+ run keep it too
    k4 = method.config(dataclasses.replace(spec, variant=Axes(num_capsules=4)))
    assert k4["model"]["enc_norm"] == 8 and k4["model"]["num_capsules"] == 4
