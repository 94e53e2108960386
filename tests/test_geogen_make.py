"""Making, storing and reading a dataset: determinism, round trip, resume, bad input."""
import json
import os

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from geogen import schema, shards
from geogen.cli import main
from geogen.dataset import GeoDataset, read_split
from geogen.errors import GeogenError
from geogen.make import MakeConfig, make_dataset, render_one


def _make(tmp_path, name="d", **kw):
    args = dict(n=40, val=6, test=10, size=32, out=str(tmp_path / name), workers=1, shard_size=16)
    args.update(kw)
    return make_dataset(MakeConfig(**args), progress=False)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    return _make(tmp_path_factory.mktemp("geo"))


def test_output_does_not_depend_on_workers_or_shard_size(made, tmp_path):
    other = _make(tmp_path, workers=2)
    a, b = shards.read_manifest(made), shards.read_manifest(other)
    assert a["shards"] == b["shards"], "same shards, byte for byte (sha256)"
    assert shards.manifest_hash(made) == shards.manifest_hash(other)
    resharded = _make(tmp_path, "r", shard_size=7)
    assert len(shards.read_manifest(resharded)["shards"]["train"]) == 6
    for split in schema.SPLITS:
        x = read_split(made, split, schema.REQUIRED_FIELDS)
        y = read_split(resharded, split, schema.REQUIRED_FIELDS)
        for name in schema.REQUIRED_FIELDS:
            assert np.array_equal(x[name], y[name]), (split, name)
    other_seed = _make(tmp_path, "s", seed=1)
    assert not np.array_equal(read_split(made, "train", ("frames",))["frames"],
                              read_split(other_seed, "train", ("frames",))["frames"])


def test_schema_round_trip_and_single_sample_regeneration(made):
    m = shards.read_manifest(made)
    assert m["counts"] == {"train": 40, "val": 6, "test": 10}
    assert [s["count"] for s in m["shards"]["train"]] == [16, 16, 8]
    config = MakeConfig(**{**m["config"], "out": str(made)})
    stored = read_split(made, "train", schema.REQUIRED_FIELDS)
    for i in (0, 17, 39):   # any sample can be made again alone, from (seed, split, index)
        sample = {k: v[i] for k, v in stored.items()}
        schema.check_sample(sample, frames=2, size=32)
        fresh = render_one(config, "train", i)
        for name in schema.REQUIRED_FIELDS:
            assert np.array_equal(sample[name], fresh[name]), name
    import h5py
    with h5py.File(made / "train" / "shard-00001.h5") as f:
        assert set(schema.SHARD_ATTRS) <= set(f.attrs)
        assert f.attrs["first_index"] == 16 and f.attrs["split"] == "train"
        assert json.loads(f.attrs["config"])["seed"] == 0
    assert shards.verify(made) == []


def test_torch_dataset_and_read_split_agree(made):
    ds = GeoDataset(made, "test", fields=("frames", "amodal", "label", "flow"))
    assert len(ds) == 10
    item = ds[3]
    assert item["frames"].dtype == torch.uint8 and item["frames"].shape == (2, 32, 32, 3)
    assert item["amodal"].dtype == torch.bool and item["amodal"].shape == (2, 3, 32, 32)
    assert item["label"].dtype == torch.int64 and item["label"].shape == ()
    whole = read_split(made, "test", ("frames",), limit=5)["frames"]
    assert whole.shape == (5, 2, 32, 32, 3)
    assert np.array_equal(whole[3], item["frames"].numpy())
    loader = torch.utils.data.DataLoader(ds, batch_size=4, num_workers=2)
    batches = list(loader)
    assert torch.equal(batches[0]["frames"][3], item["frames"])
    assert sum(len(b["label"]) for b in batches) == 10
    with pytest.raises(GeogenError, match="not stored"):
        GeoDataset(made, "test", fields=("nonsense",))


def test_resume_finishes_an_interrupted_run(tmp_path):
    cfg = dict(n=40, val=0, test=8, size=32, out=str(tmp_path / "d"), workers=1, shard_size=16)
    full = _make(tmp_path, "full", **{k: v for k, v in cfg.items() if k != "out"})
    root = make_dataset(MakeConfig(**cfg), progress=False)
    # Interrupt: lose the manifest and a shard, leave a half-written temporary file behind.
    os.remove(root / "manifest.json")
    os.remove(root / "train" / "shard-00001.h5")
    (root / "train" / "shard-00002.h5.tmp").write_bytes(b"half")
    with pytest.raises(GeogenError, match="--resume"):
        make_dataset(MakeConfig(**cfg), progress=False)
    make_dataset(MakeConfig(**cfg), resume=True, progress=False)
    assert shards.read_manifest(root)["shards"] == shards.read_manifest(full)["shards"]
    assert not list(root.glob("*/*.tmp"))
    with pytest.raises(GeogenError, match="other settings"):
        make_dataset(MakeConfig(**{**cfg, "seed": 5}), resume=True, progress=False)
    make_dataset(MakeConfig(**{**cfg, "seed": 5}), force=True, progress=False)
    assert shards.read_manifest(root)["seed"] == 5


def _edit_label(path):
    """The same samples, one label changed in place: a readable shard of the same range."""
    import h5py
    with h5py.File(path, "r+") as f:
        f["label"][3] = (f["label"][3] + 1) % 4


def _copy_shard(src, dst, name):
    """Another run's shard of the same range copied over one, its sidecar too."""
    for path in src.glob(f"{name}*"):
        (dst / path.relative_to(src)).write_bytes(path.read_bytes())


def _files(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


@pytest.mark.parametrize("finished", [False, True])
def test_resume_remakes_a_shard_changed_since_it_was_written(tmp_path, finished):
    """A shard is kept on --resume only when it is the one the run writes: a label edited in
    place, or another seed's shard of the same range, is made again (unfinished run: its
    sidecar and attributes tell; finished: its manifest's sha256 too)."""
    cfg = dict(n=40, val=0, test=8, shard_size=16)
    full = _make(tmp_path, "full", **cfg)
    other = _make(tmp_path, "other", seed=1, **cfg)
    root = _make(tmp_path, "d", **cfg)
    if not finished:
        os.remove(root / "manifest.json")
    _edit_label(root / "train" / "shard-00001.h5")
    _copy_shard(other, root, "test/shard-00000.h5")
    make_dataset(MakeConfig(**{**cfg, "size": 32, "out": str(root), "workers": 1}),
                 resume=True, progress=False)
    assert _files(root) == _files(full)


def test_verify_finds_a_shard_changed_after_it_was_written(tmp_path):
    """Even with a manifest whose sha256 were taken after the change (what a merge over a
    changed part wrote): the shard's sidecar, or its attributes, say it is not the run's."""
    root = _make(tmp_path, n=20, test=4, val=0)
    other = _make(tmp_path, "other", n=20, test=4, val=0, seed=1)
    _edit_label(root / "train" / "shard-00001.h5")
    _copy_shard(other, root, "test/shard-00000.h5")
    m = shards.read_manifest(root)
    for entries in m["shards"].values():
        for e in entries:
            e["sha256"] = shards.file_sha256(root / e["file"])
    shards.write_json_atomic(root / "manifest.json", m)
    problems = shards.verify(root)
    assert any(p.startswith("train/shard-00001.h5: ") and "changed since it was written" in p
               for p in problems), problems
    assert any(p.startswith("test/shard-00000.h5: ") and "seed" in p and "config" in p
               for p in problems), problems
    res = CliRunner().invoke(main, ["verify", str(root)])
    assert res.exit_code == 1 and "Traceback" not in res.output


def test_a_folder_without_sidecars_still_verifies_and_resumes_on_its_manifest(tmp_path):
    """Shards written before the sidecars existed: verify passes them on their checksums, and
    --resume on the finished folder keeps them on the manifest's sha256."""
    root = _make(tmp_path, n=20, test=4, val=0)
    for side in root.glob("*/*.sha256"):
        side.unlink()
    assert shards.verify(root) == []
    before = _files(root)
    make_dataset(MakeConfig(n=20, val=0, test=4, size=32, out=str(root), workers=1,
                            shard_size=16), resume=True, progress=False)
    assert _files(root) == before  # nothing made again (no sidecar written either)


def test_verify_catches_corrupt_and_truncated_shards(tmp_path):
    root = _make(tmp_path, n=20, test=4, val=0)
    runner = CliRunner()
    assert runner.invoke(main, ["verify", str(root)]).exit_code == 0
    path = root / "train" / "shard-00001.h5"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    res = runner.invoke(main, ["verify", str(root)])
    assert res.exit_code == 1 and "checksum mismatch" in res.output
    path.write_bytes(bytes(data[:200]))    # truncated: unreadable as HDF5 too
    assert shards.verify(root, checksums=False)
    with pytest.raises(GeogenError, match="cannot open shard"):
        read_split(root, "train", ("frames",))


@pytest.mark.parametrize("args, message", [
    (["--n", "0"], "n must be positive"),
    (["--n", "-3"], "n must be positive"),
    (["--n", "5", "--size", "16"], "size must be in 32..512"),
    (["--n", "5", "--size", "513"], "size must be in 32..512"),
    (["--n", "5", "--workers", "many"], "--workers"),
    (["--n", "5", "--resume", "--force"], "not both"),
    (["--n", "5", "--seed", str(2**64)], "seed must be in 0..18446744073709551615 (2**64 - 1)"),
    (["--n", "5", "--seed", str(2**70)], "seed must be in 0..18446744073709551615 (2**64 - 1)"),
    (["--n", "5", "--seed", "-1"], "seed must be in 0..18446744073709551615"),
])
def test_bad_input_is_one_line_and_nonzero(tmp_path, args, message):
    res = CliRunner().invoke(main, ["make", "--out", str(tmp_path / "o"), "--quiet", *args])
    assert res.exit_code != 0
    assert message in res.output and "Traceback" not in res.output
    assert len(res.output.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()  # refused before any file (run.json, a .tmp shard)


def test_the_largest_seed_an_hdf5_attribute_holds_is_made(tmp_path):
    root = _make(tmp_path, n=5, val=0, test=0, seed=2**64 - 1)
    assert shards.verify(root) == [] and shards.read_manifest(root)["seed"] == 2**64 - 1
    with pytest.raises(GeogenError, match="seed must be in"):
        _make(tmp_path, "o", n=5, seed=2**64)
    assert not (tmp_path / "o").exists()


def test_folder_with_data_and_unwritable_folder_are_refused(tmp_path):
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    res = CliRunner().invoke(main, ["make", "--n", "5", "--out", str(busy), "--quiet"])
    assert res.exit_code != 0 and "already holds data" in res.output
    res = CliRunner().invoke(main, ["make", "--n", "5", "--out", str(busy), "--resume"])
    assert res.exit_code != 0 and "no geogen run recorded" in res.output
    assert (busy / "notes.txt").read_text() == "mine"
    blocker = tmp_path / "file"
    blocker.write_text("x")
    res = CliRunner().invoke(main, ["make", "--n", "5", "--out", str(blocker / "sub"), "--quiet"])
    assert res.exit_code != 0 and "which is a file, not a folder" in res.output
    res = CliRunner().invoke(main, ["info", str(tmp_path / "missing")])
    assert res.exit_code != 0 and "no manifest.json" in res.output


def test_a_refused_out_folder_says_what_it_holds(tmp_path):
    # --resume is offered only where it would work: on an unfinished run of the same settings.
    out = tmp_path / "d"
    make = ["make", "--n", "20", "--val", "0", "--test", "4", "--size", "32", "--workers", "1",
            "--out", str(out), "--quiet"]

    def refused(args, message):
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 1 and res.output.count("\n") == 1, res.output
        assert message in res.output, res.output
        return res.output

    assert CliRunner().invoke(main, make).exit_code == 0
    assert "--resume" not in refused(make, "already holds this dataset, finished (the same "
                                           "settings); nothing to make")
    assert "--resume" not in refused(make + ["--seed", "3"], "holds a finished dataset made "
                                                            "with other settings; use --force")
    os.remove(out / "manifest.json")  # as an interrupted run leaves it
    refused(make, "holds an unfinished run of these settings; pass --resume to finish it")
    assert "--resume" not in refused(make + ["--seed", "3"], "holds an unfinished dataset made "
                                                            "with other settings")
    mine = tmp_path / "mine"
    mine.mkdir()
    for name in ("a.txt", "b.txt", "c.txt", "d.txt"):
        (mine / name).write_text("mine")
    other = make[:-3] + ["--out", str(mine), "--quiet"]
    assert "--resume" not in refused(other, "no geogen run recorded (a.txt, b.txt, c.txt and 1 "
                                            "more), not a dataset; choose another --out")
    assert sorted(p.name for p in mine.iterdir()) == ["a.txt", "b.txt", "c.txt", "d.txt"]


def test_show_writes_a_contact_sheet(made, tmp_path):
    out = tmp_path / "sheet.png"
    res = CliRunner().invoke(main, ["show", str(made), "--split", "test", "--index", "0-2",
                                    "-o", str(out)])
    assert res.exit_code == 0, res.output
    from PIL import Image
    img = np.asarray(Image.open(out))
    # the titles' band of 16 px, then 3 rows; 2 frames + 1 flow + 2 visible + 3 masks = 8
    # tiles of 96 px (32 px enlarged 3x), then the flow's key in a column of its own
    assert img.shape == (16 + 3 * 98 + 2, 8 * 98 + 2 + 12 + 96 + 2, 3)
    res = CliRunner().invoke(main, ["show", str(made), "--index", "9-12", "-o", str(out)])
    assert res.exit_code != 0 and "out of range" in res.output


def test_shards_smaller_than_one_chunk(tmp_path):
    # 32 px pairs go 32 to a chunk; val and test shards of 3 samples once failed to write
    # ("Chunk shape must not be greater than data shape").
    assert shards.chunk_samples(32, 2) > 3
    root = make_dataset(MakeConfig(n=40, val=3, test=3, size=32, workers=1,
                                   out=str(tmp_path / "small")), progress=False)
    assert shards.verify(root) == []
    cfg = MakeConfig(n=40, val=3, test=3, size=32)
    stored = read_split(root, "test", schema.REQUIRED_FIELDS)
    for i in range(3):
        again = render_one(cfg, "test", i)
        assert all(np.array_equal(stored[k][i], again[k]) for k in schema.REQUIRED_FIELDS)
