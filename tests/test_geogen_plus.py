"""Geo+: textured shapes on photographs, exact flow, determinism, recorded and checked sources."""
import json

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image
from scipy import ndimage

from geogen import schema, shards
from geogen.cli import main
from geogen.dataset import read_split
from geogen.make import MakeConfig, make_dataset, render_one
from geogen.variants import geo_plus_banks

SIZE = 64  # shapes of 13-19 px: enough interior pixels to measure texture and warp errors
N = 24
# Flow tolerance, in 8-bit grey levels, for the default (paper) look: warping frame t+1 back
# with the stored flow reproduces frame t's interior shape pixels to a mean of ~7.4 and a 99th
# percentile of ~37 (bilinear resampling of the texture twice: rendering and warping; its
# crisp greyscale patterns hold more contrast per pixel than the camouflage look's photo crops,
# which gave ~4 and ~21); a flow off by 0.5 px gives a mean of 12.5-13.3 and a 99th percentile
# of 50-61, so these bounds pass the exact flow and catch that.
WARP_MEAN_TOL = 9.5
WARP_P99_TOL = 42.0
MARGIN = 2  # pixels kept away from every edge of the visible region, in both frames


@pytest.fixture(scope="module")
def samples():
    cfg = MakeConfig(variant="geo+", size=SIZE)
    return [render_one(cfg, "test", i) for i in range(N)]


def warp_errors(sample, shift=(0.0, 0.0)):
    """|frame t+1 read at p + flow(p) - frame t at p| over the interior pixels of every slot
    that stay interior in frame t+1 (non-occluded, away from edges), in grey levels."""
    f0, f1 = (f.astype(np.float32) for f in sample["frames"][:2])   # (H, W, 3) each
    flow = sample["flow"][0] + np.float32(shift)                      # (H, W, 2)
    out = []
    for slot in range(len(sample["present"])):   # the sample's slots: Geo's 3, a figure's 10
        inner0 = ndimage.binary_erosion(sample["visible"][0] == slot + 1, iterations=MARGIN)
        inner1 = ndimage.binary_erosion(sample["visible"][1] == slot + 1, iterations=MARGIN)
        ys, xs = np.nonzero(inner0)
        tx, ty = xs + 0.5 + flow[ys, xs, 0], ys + 0.5 + flow[ys, xs, 1]   # pixel-centre coords
        ix, iy = np.floor(tx).astype(int), np.floor(ty).astype(int)
        ok = (ix >= 0) & (iy >= 0) & (ix < SIZE) & (iy < SIZE)
        ok[ok] = inner1[iy[ok], ix[ok]]
        coords = np.stack([ty[ok] - 0.5, tx[ok] - 0.5])                  # (2, M) row, column
        warped = np.stack([ndimage.map_coordinates(f1[..., c], coords, order=1)
                           for c in range(3)], -1)                        # (M, 3)
        out.append(np.abs(warped - f0[ys[ok], xs[ok]]).ravel())
    return np.concatenate(out)


def test_flow_is_exact_within_the_resampling_tolerance(samples):
    err = np.concatenate([warp_errors(s) for s in samples])
    assert len(err) > 10000
    assert err.mean() < WARP_MEAN_TOL and np.percentile(err, 99) < WARP_P99_TOL
    for shift in ((0.5, 0.0), (0.0, 0.5), (-0.5, 0.0)):   # the tolerance catches a 0.5 px error
        bad = np.concatenate([warp_errors(s, shift) for s in samples])
        assert bad.mean() > WARP_MEAN_TOL, shift


def test_flow_is_exact_under_conformal_motion():
    # Rotating, scaling textures: the texture turns with the shape, so the same bound holds
    # (measured: mean ~3.6, 99th percentile ~21).
    cfg = MakeConfig(variant="geo+", size=SIZE, motion="conformal")
    err = np.concatenate([warp_errors(render_one(cfg, "test", i)) for i in range(N)])
    assert len(err) > 10000
    assert err.mean() < WARP_MEAN_TOL and np.percentile(err, 99) < WARP_P99_TOL


def test_shapes_are_textured_like_their_sources(samples):
    _, tex = geo_plus_banks(None, None, MakeConfig().max_images, SIZE)
    source_std = [float(im.mean(-1).std()) for im in tex.images]    # grey-level spread
    ratios = []
    for s in samples:
        frame = s["frames"][0].astype(np.float32) / 255.0              # (H, W, 3)
        for slot in range(schema.S):
            inner = ndimage.binary_erosion(s["visible"][0] == slot + 1)
            if inner.sum() < 30:
                continue
            std = frame[inner].mean(-1).std()
            assert std > 0.01, "a flat fill has a spread of 0"
            ratios.append(std / source_std[s["tex_source"][slot]])
    # A shape shows a small rotated, tinted crop at the shape's pixel scale, so it varies less
    # than the whole source image (measured: median ratio 0.43), but in the same range.
    assert len(ratios) > 20 and 0.3 < np.median(ratios) < 1.5


def test_backgrounds_are_static_photographs(samples):
    bg_bank, tex_bank = geo_plus_banks(None, None, MakeConfig().max_images, SIZE)
    for s in samples:
        # Pixels no shape touches in either frame (edge pixels hold partial coverage).
        bg = ~ndimage.binary_dilation(s["amodal"].any(axis=(0, 1)), iterations=2)  # (H, W)
        frame0 = s["frames"][0].astype(np.float32) / 255.0
        assert frame0[bg].std(0).mean() > 0.03, "not a flat background"
        assert np.array_equal(s["frames"][0][bg], s["frames"][1][bg])   # static: flow 0
        assert np.all(s["flow"][0][s["visible"][0] == schema.BACKGROUND] == 0)
        assert 0 <= s["bg_source"] < len(bg_bank)
        tex = s["tex_source"]
        assert np.array_equal(tex < 0, ~s["present"]) and np.all(tex < len(tex_bank))
    assert len({int(s["bg_source"]) for s in samples}) > 5


def test_geo_plus_has_the_geo_scene_of_the_same_sample(samples):
    for i in (0, 1, 2):
        geo = render_one(MakeConfig(variant="geo", size=SIZE), "test", i)
        for name in ("pose", "present", "label", "amodal", "visible", "flow", "flow_bw"):
            assert np.array_equal(geo[name], samples[i][name]), name
        assert not np.array_equal(geo["frames"], samples[i]["frames"])


def _make(tmp_path, name, **kw):
    args = dict(variant="geo+", n=20, val=2, test=5, size=32, out=str(tmp_path / name),
                workers=1, shard_size=8)
    args.update(kw)
    return make_dataset(MakeConfig(**args), progress=False)


def test_make_is_deterministic_across_workers_and_records_sources(tmp_path):
    one, two = _make(tmp_path, "w1"), _make(tmp_path, "w2", workers=2)
    m1, m2 = shards.read_manifest(one), shards.read_manifest(two)
    assert m1["shards"] == m2["shards"], "same bytes whatever the worker count"
    assert shards.verify(one) == []
    assert m1["fields"] == list(schema.REQUIRED_FIELDS) + ["bg_source", "tex_source"]
    assert m1["sources"]["backgrounds"]["source"] == "default:backgrounds"
    assert m1["sources"]["textures"]["names"][:3] == ["brick", "grass", "gravel"]
    stored = read_split(one, "val", m1["fields"])
    cfg = MakeConfig(variant="geo+", n=20, val=2, test=5, size=32)
    for i in range(2):
        again = render_one(cfg, "val", i)
        for name in m1["fields"]:
            assert np.array_equal(stored[name][i], again[name]), name


def _write_images(folder, count, grey=False, seed=0):
    folder.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    for k in range(count):
        shape = (80, 96) if grey else (80, 96, 3)
        Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8)).save(folder / f"im{k}.png")
    return folder


def test_image_folders_are_used_and_recorded(tmp_path):
    bgs = _write_images(tmp_path / "bgs", 2)
    tex = _write_images(tmp_path / "tex" / "sub", 1, grey=True).parent
    res = CliRunner().invoke(main, ["make", "--variant", "geo+", "--n", "12", "--size", "32",
                                    "--out", str(tmp_path / "d"), "--backgrounds", str(bgs),
                                    "--textures", str(tex), "--workers", "1", "--quiet"])
    assert res.exit_code == 0, res.output
    m = shards.read_manifest(tmp_path / "d")
    assert m["sources"]["backgrounds"]["source"] == str(bgs.resolve())
    assert m["sources"]["backgrounds"]["names"] == ["im0.png", "im1.png"]
    assert m["sources"]["textures"]["names"] == ["sub/im0.png"]
    assert m["sources"]["textures"]["grey"] == [0]
    assert m["config"]["backgrounds"] == str(bgs)
    data = read_split(tmp_path / "d", "train", ("bg_source", "tex_source", "present"))
    assert set(np.unique(data["bg_source"])) == {0, 1}
    assert np.array_equal(data["tex_source"], np.where(data["present"], 0, -1))


def test_bad_sources_and_options_are_one_line_errors(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("no image here")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "photo.jpg").write_bytes(b"not a jpeg")
    out = tmp_path / "out"
    cases = [(["--variant", "geo+", "--backgrounds", str(empty)], str(empty)),
             (["--variant", "geo+", "--textures", str(broken)], "photo.jpg"),
             (["--variant", "geo+", "--textures", str(tmp_path / "nope")], "nope"),
             (["--variant", "geo", "--backgrounds", str(broken)], "apply to geo+"),
             (["--variant", "geo+", "--max-images", "0"], "max_images")]
    for args, message in cases:
        res = CliRunner().invoke(main, ["make", "--n", "4", "--size", "32", "--out", str(out),
                                        "--quiet", *args])
        assert res.exit_code != 0, args
        assert message in res.output and "Traceback" not in res.output, res.output
        assert len(res.output.strip().splitlines()) == 1
        assert not out.exists(), "nothing is written before the sources load"


def test_show_draws_geo_plus_rows(tmp_path):
    root = _make(tmp_path, "s", n=4, val=0, test=3)
    out = tmp_path / "sheet.png"
    res = CliRunner().invoke(main, ["show", str(root), "--index", "0-2", "-o", str(out)])
    assert res.exit_code == 0, res.output
    sheet = np.asarray(Image.open(out))
    stored = read_split(root, "test", ("frames",))["frames"]           # (N, T, H, W, 3)
    tile = 96                                                          # 32 px enlarged 3x
    first = sheet[16 + 2:16 + 2 + tile, 2:2 + tile]                    # row 0, frame 0
    assert np.array_equal(first[::3, ::3], stored[0, 0]), "the frame is shown as stored"
    assert json.loads((root / "run.json").read_text())["variant"] == "geo+"


def _cut_png(path, seed=1):
    """A PNG whose second half is missing, as a copy interrupted half-way leaves it."""
    rng = np.random.default_rng(seed)
    Image.fromarray(rng.integers(0, 256, (80, 96, 3), dtype=np.uint8)).save(path)
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])


def _make_cli(tmp_path, *args):
    return CliRunner().invoke(main, ["make", "--variant", "geo+", "--n", "12", "--val", "0",
                                     "--test", "0", "--size", "32", "--workers", "1", "--quiet",
                                     "--out", str(tmp_path / "d"), *args])


def test_a_background_smaller_than_a_sample_is_refused_by_name(tmp_path):
    """An 8 x 8 background once gave a fifth of the samples a flat blur: it is refused (not
    enlarged: no image that small reads as a photograph), before any output exists."""
    bgs = _write_images(tmp_path / "bgs", 2)
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(bgs / "tiny.png")
    Image.fromarray(np.full((32, 40, 3), 90, np.uint8)).save(bgs / "just.png")  # 32 px: enough
    res = _make_cli(tmp_path, "--backgrounds", str(bgs))
    assert res.exit_code == 1 and not isinstance(res.exception, Exception), res.output
    line, = res.output.strip().splitlines()
    assert "tiny.png is 8 x 8 px, smaller than one 32 px sample" in line
    assert "--skip-bad-images" in line and not (tmp_path / "d").exists()
    res = _make_cli(tmp_path, "--backgrounds", str(bgs), "--skip-bad-images")
    assert res.exit_code == 0, res.output
    assert "skipped 1 unusable background image (named in its manifest.json)" in res.output
    used = shards.read_manifest(tmp_path / "d")["sources"]["backgrounds"]
    assert used["names"] == ["im0.png", "im1.png", "just.png"] and used["skipped"] == ["tiny.png"]
    assert used["total_found"] == 4
    drawn = read_split(tmp_path / "d", "train", ("bg_source",))["bg_source"]
    assert set(np.unique(drawn)) <= {0, 1, 2}


def test_an_unreadable_image_names_its_file_and_can_be_skipped(tmp_path):
    tex = _write_images(tmp_path / "tex", 2)
    _cut_png(tex / "cut.png")
    res = _make_cli(tmp_path, "--textures", str(tex))
    assert res.exit_code == 1 and not isinstance(res.exception, Exception), res.output
    line, = res.output.strip().splitlines()
    assert f"cannot read image {tex / 'cut.png'}" in line and "--skip-bad-images" in line
    assert not (tmp_path / "d").exists()
    res = _make_cli(tmp_path, "--textures", str(tex), "--skip-bad-images")
    assert res.exit_code == 0 and "skipped 1 unusable texture image" in res.output, res.output
    m = shards.read_manifest(tmp_path / "d")
    assert m["sources"]["textures"]["skipped"] == ["cut.png"]
    assert "skipped" not in m["sources"]["backgrounds"], "the bundled ones need no such entry"
    assert "skip_bad_images" not in m["config"], "it changes no byte of a run that succeeds"
    # several at once: the first reason, then the other names; none left: one line too
    bad = tmp_path / "bad"
    bad.mkdir()
    for k in range(6):
        _cut_png(bad / f"c{k}.png")
    res = _make_cli(tmp_path, "--backgrounds", str(bad), "--force")
    line, = res.output.strip().splitlines()
    assert res.exit_code == 1 and "6 images under" in line and "also c1.png" in line
    assert "and 2 more" in line
    res = _make_cli(tmp_path, "--backgrounds", str(bad), "--force", "--skip-bad-images")
    line, = res.output.strip().splitlines()
    assert res.exit_code == 1 and "no usable image is left" in line
    res = CliRunner().invoke(main, ["make", "--n", "4", "--size", "32", "--skip-bad-images",
                                    "--out", str(tmp_path / "g"), "--quiet"])
    assert res.exit_code == 1 and "apply to geo+" in res.output


def test_the_readme_command_for_own_folders_runs(tmp_path):
    """docs/data.md's Geo+ command from one's own texture and background folders (the README
    points there), its options as written (only the folders and the counts made small)."""
    import re
    import shlex
    from pathlib import Path
    doc = (Path(__file__).parents[1] / "docs" / "data.md").read_text()
    block = next(b for b in re.findall(r"```\n(.*?)```", doc, re.S) if "--textures ~/" in b)
    args = shlex.split(block.replace("\\\n", " "))
    assert args[:2] == ["geogen", "make"]
    tex = _write_images(tmp_path / "brodatz", 2, grey=True)
    bgs = _write_images(tmp_path / "imagenet" / "train" / "n01440764", 2).parent
    swap = {"~/brodatz": str(tex), "~/imagenet/train": str(bgs), "100000": "8",
            "data/geoplus-own": str(tmp_path / "own")}
    args = [swap.get(a, a) for a in args[2:]]
    res = CliRunner().invoke(main, ["make", *args, "--val", "0", "--test", "0", "--size", "32",
                                    "--workers", "1", "--quiet"])
    assert res.exit_code == 0, res.output
    used = shards.read_manifest(tmp_path / "own")["sources"]
    assert used["textures"]["names"] == ["im0.png", "im1.png"]
    assert used["backgrounds"]["names"] == ["n01440764/im0.png", "n01440764/im1.png"]
