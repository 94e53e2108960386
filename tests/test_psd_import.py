import h5py
import numpy as np
import pytest
from PIL import Image

from geogen import psd_import, schema, shards
from geogen.errors import GeogenError

H = 32
BG = (224, 236, 212)
BLUE, GREEN, RED = (30, 40, 220), (50, 210, 20), (230, 30, 60)


def _masks(centres, slots):
    """Crisp silhouettes at integer pixel positions: circle d=10, square 8, triangle 10."""
    y, x = np.mgrid[0:H, 0:H] + 0.5
    out = {}
    for slot, (cx, cy) in zip(slots, centres):
        if slot == 0:
            m = (x - cx) ** 2 + (y - cy) ** 2 <= 25
        elif slot == 1:
            m = (np.abs(x - cx) <= 4) & (np.abs(y - cy) <= 4)
        else:  # upward triangle: apex above the centre, base below
            m = (y >= cy - 5) & (y <= cy + 4) & (np.abs(x - cx) <= (y - (cy - 5)) * 0.55)
        out[slot] = m
    return out


def _write_sample(folder, i, shapes, bg=BG):
    """shapes: list of (slot, colour, centre, motion in pixels); PSD's files for one sample.

    Returns the truth: visible maps of both frames and each slot's motion."""
    frames, visible = [], []
    flow = np.zeros((2, H, H), np.float32)
    for t in range(2):
        image = np.empty((H, H, 3), np.uint8)
        image[:] = bg
        vis = np.zeros((H, H), np.uint8)
        for slot, colour, (cx, cy), (dx, dy) in sorted(shapes):  # circle drawn first (back)
            m = _masks([(cx + t * dx, cy + t * dy)], [slot])[slot]
            image[m] = colour
            vis[m] = slot + 1
            if t == 0:
                flow[0][m], flow[1][m] = dx / H, dy / H  # PSD: (dx, dy) channel first, / side
        frames.append(image)
        visible.append(vis)
    for t, image in enumerate(frames):
        Image.fromarray(image).save(folder / f"{i}_im{t + 1}.png")
    np.save(folder / f"{i}_f.npy", flow)
    return np.stack(visible), {slot: (dx, dy) for slot, _, _, (dx, dy) in shapes}


def _folder(tmp_path):
    a = 2.0  # the circle's motion is (a, a) in PSD
    truth = {
        "1": _write_sample(tmp_path, 1, [(0, GREEN, (12, 12), (a, a)),
                                         (1, BLUE, (20, 14), (a, a + 3)),
                                         (2, RED, (14, 21), (a - 2, a))]),
        "2": _write_sample(tmp_path, 2, [(0, RED, (16, 16), (-1, -1))]),
        "10": _write_sample(tmp_path, 10, [(0, BLUE, (10, 11), (1, 1)),
                                           (2, GREEN, (21, 20), (4, 1))]),
        # The square moves exactly like the circle: only the shapes' geometry tells them apart.
        "11": _write_sample(tmp_path, 11, [(0, RED, (9, 10), (1, 1)),
                                           (1, GREEN, (22, 21), (1, 1))]),
    }
    return truth


def test_converts_frames_flow_and_derives_masks(tmp_path):
    truth = _folder(tmp_path)
    arrays, info = psd_import.convert_psd_folder(tmp_path)
    assert info["ids"] == ["1", "2", "10", "11"]  # numeric, not string, order
    assert info["count"] == 4 and info["size"] == H and info["skipped"] == []
    assert info["masks_by_geometry"] == 1
    assert set(info["absent"]) == {"amodal", "pose"}
    for n, i in enumerate(info["ids"]):
        visible, motion = truth[i]
        frame1 = np.asarray(Image.open(tmp_path / f"{i}_im1.png"))
        assert np.array_equal(arrays["frames"][n, 0], frame1)
        assert np.array_equal(arrays["visible"][n], visible)
        # Flow in pixels, (dx, dy), on frame 1's grid; 0 on the background.
        fwd, bwd = arrays["flow"][n, 0], arrays["flow_bw"][n, 0]  # (H, H, 2)
        assert np.all(fwd[visible[0] == 0] == 0)
        for slot, (dx, dy) in motion.items():
            assert np.allclose(fwd[visible[0] == slot + 1], (dx, dy), atol=1e-5)
            assert np.allclose(bwd[visible[1] == slot + 1], (-dx, -dy), atol=1e-5)
        present = [s in motion for s in range(schema.S)]
        assert arrays["present"][n].tolist() == present
        assert arrays["label"][n] == schema.CLASS_PRESENCE.index(tuple(present))


def test_flow_sign_moves_frame1_onto_frame2(tmp_path):
    _write_sample(tmp_path, 0, [(0, BLUE, (12, 13), (3, 3)), (1, RED, (22, 20), (3, -1))])
    arrays, _ = psd_import.convert_psd_folder(tmp_path)
    f1, f2 = arrays["frames"][0]  # (H, H, 3) each
    flow = arrays["flow"][0, 0]
    ys, xs = np.nonzero(arrays["visible"][0, 0])
    tx = np.round(xs + flow[ys, xs, 0]).astype(int)
    ty = np.round(ys + flow[ys, xs, 1]).astype(int)
    assert np.array_equal(f2[ty, tx], f1[ys, xs])  # (x + dx, y + dy) in frame 2 is the same point


def test_placeholders_complete_the_schema(tmp_path):
    _folder(tmp_path)
    arrays, info = psd_import.convert_psd_folder(tmp_path)
    full = psd_import.placeholders(arrays)
    for n in range(info["count"]):
        schema.check_sample({k: v[n] for k, v in full.items()}, frames=2, size=H)
    assert not full["amodal"].any() and np.isnan(full["pose"]).all()
    assert np.array_equal(full["visible"], arrays["visible"])  # derived fields kept


def test_colours_that_do_not_allow_masks(tmp_path):
    _write_sample(tmp_path, 1, [(0, BLUE, (12, 12), (1, 1))])
    _write_sample(tmp_path, 2, [(0, BLUE, (12, 12), (1, 1))], bg=(20, 20, 20))  # dark background
    arrays, info = psd_import.convert_psd_folder(tmp_path)
    assert info["ids"] == ["1"] and info["skipped"][0]["id"] == "2"
    assert "background" in info["skipped"][0]["reason"]
    (tmp_path / "1_im1.png").unlink()
    with pytest.raises(GeogenError, match="masks"):
        psd_import.convert_psd_folder(tmp_path)
    arrays, info = psd_import.convert_psd_folder(tmp_path, masks=False)
    assert set(arrays) == {"frames", "flow"} and arrays["frames"].shape == (1, 2, H, H, 3)
    assert {"visible", "flow_bw", "present", "label", "amodal", "pose"} == set(info["absent"])


def test_bad_folders_name_the_problem(tmp_path):
    with pytest.raises(GeogenError, match="no PSD sample"):
        psd_import.convert_psd_folder(tmp_path)
    _write_sample(tmp_path, 3, [(0, BLUE, (12, 12), (1, 1))])
    np.save(tmp_path / "3_f.npy", np.zeros((H, H, 2), np.float32))  # channel-last: not PSD's
    with pytest.raises(GeogenError, match="3_f.npy"):
        psd_import.convert_psd_folder(tmp_path)
    (tmp_path / "3_f.npy").unlink()
    with pytest.raises(GeogenError, match="3_f.npy"):
        psd_import.convert_psd_folder(tmp_path)


def test_writes_a_normal_shard_folder(tmp_path):
    src = tmp_path / "psd"
    src.mkdir()
    _folder(src)
    root, info = psd_import.write_psd_shards(src, tmp_path / "out", shard_size=3)
    assert shards.verify(root) == []
    manifest = shards.read_manifest(root)
    assert manifest["counts"] == {"train": 0, "val": 0, "test": 4}
    assert [e["count"] for e in manifest["shards"]["test"]] == [3, 1]
    assert set(manifest["import"]["absent"]) == {"amodal", "pose"}
    arrays, _ = psd_import.convert_psd_folder(src)
    with h5py.File(root / manifest["shards"]["test"][1]["file"], "r") as f:
        assert np.array_equal(f["flow"][:], arrays["flow"][3:])
        assert np.array_equal(f["visible"][:], arrays["visible"][3:])
        assert f.attrs["first_index"] == 3 and f.attrs["variant"] == "psd"
    with pytest.raises(GeogenError, match="not an empty folder"):
        psd_import.write_psd_shards(src, root)


def test_import_psd_command(tmp_path):
    from click.testing import CliRunner

    from geogen.cli import main
    from geogen.dataset import read_split

    src = tmp_path / "psd"
    src.mkdir()
    _folder(src)
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["import-psd", str(src), "--out", str(out), "--split", "val"])
    assert res.exit_code == 0, res.output
    assert "val 4" in res.output and "amodal, pose" in res.output
    manifest = shards.read_manifest(out)
    assert manifest["variant"] in schema.IMPORT_VARIANTS
    assert manifest["variant"] not in schema.VARIANTS  # import-only: never generated
    res = CliRunner().invoke(main, ["verify", str(out)])
    assert res.exit_code == 0 and "OK" in res.output
    stored = read_split(out, "val", ("frames", "flow", "visible"))
    arrays, _ = psd_import.convert_psd_folder(src)
    for name in ("frames", "flow", "visible"):
        assert np.array_equal(stored[name], arrays[name])
    # Bad input: one line, non-zero exit, no traceback.
    for args, message in ((["import-psd", str(src), "--out", str(out)], "not an empty folder"),
                          (["import-psd", str(tmp_path / "nope"), "--out", str(tmp_path / "o2")],
                           "nope"),
                          (["import-psd", str(src), "--out", str(tmp_path / "o3"), "--split",
                            "dev"], "split must be one of")):
        res = CliRunner().invoke(main, args)
        assert res.exit_code != 0 and message in res.output, res.output
        assert "Traceback" not in res.output and len(res.output.strip().splitlines()) == 1


def test_a_flow_with_nan_is_refused_before_anything_is_written(tmp_path):
    """--no-masks reads the flow unchecked by any mask: a NaN in it is one line, no folder."""
    from click.testing import CliRunner

    from geogen.cli import main

    src = tmp_path / "psd"
    src.mkdir()
    _folder(src)
    flow = np.load(src / "2_f.npy")
    flow[:] = np.nan
    np.save(src / "2_f.npy", flow)
    for masks in ([], ["--no-masks"]):
        out = tmp_path / f"out{len(masks)}"
        res = CliRunner().invoke(main, ["import-psd", str(src), "--out", str(out), *masks])
        assert res.exit_code == 1 and len(res.output.strip().splitlines()) == 1, res.output
        assert "2_f.npy holds NaN or inf" in res.output
        assert not out.exists()


def test_an_import_without_masks_verifies_and_reads_its_absent_fields(tmp_path):
    """The absent fields hold schema.ABSENT's values (pose NaN, label -1), which verify and
    the reader accept there, and only there."""
    from geogen.dataset import read_split

    src = tmp_path / "psd"
    src.mkdir()
    _folder(src)
    root, _ = psd_import.write_psd_shards(src, tmp_path / "out", masks=False)
    assert shards.verify(root) == []
    got = read_split(root, "test", ("flow", "pose", "label"))
    assert np.isnan(got["pose"]).all() and (got["label"] == -1).all()
    with h5py.File(root / "test" / "shard-00000.h5", "r+") as f:
        f["label"][1] = 2   # a label where the folder says there is none
    problems = shards.verify(root, checksums=False)
    assert any("field 'label' is absent from this folder, so all -1, but holds 2 at sample 1"
               in p for p in problems), problems
