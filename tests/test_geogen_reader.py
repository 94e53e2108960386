"""geogen's one reader on hand-made shards: fields, frame ranges, rank rows, limits, chunks,
dtypes, the pairs view, and a one-line GeogenError for every bad folder or request."""
import json

import numpy as np
import pytest

from geogen import shards
from geogen.dataset import GeoDataset, open_split, pairs, read_split
from geogen.errors import GeogenError

T, SIZE = 3, 8
ROWS = (5, 4, 3)          # train rows of each shard
BOUNDS = (0, 5, 9, 12)    # where the shards start and end
FIELDS = ("frames", "flow", "label")


def _handmade(root, rows=ROWS):
    """A folder of three train shards written from known arrays; returns (root, arrays)."""
    rng = np.random.default_rng(0)
    n = sum(rows)
    data = {"frames": rng.integers(0, 256, (n, T, SIZE, SIZE, 3), dtype=np.uint8),
            "flow": rng.normal(0, 3, (n, T - 1, SIZE, SIZE, 2)).astype(np.float32),
            "label": np.arange(n, dtype=np.int64)}
    (root / "train").mkdir(parents=True)
    entries, start = [], 0
    for k, count in enumerate(rows):
        name = f"train/{shards.shard_name(k)}"
        sha = shards.write_arrays(root / name, {f: a[start:start + count] for f, a in data.items()},
                                  T, SIZE, {"split": "train", "first_index": start})
        entries.append({"file": name, "first_index": start, "count": count, "sha256": sha})
        start += count
    # `label` numbers the rows, so the folder names a class per row.
    manifest = {"variant": "geo", "size": SIZE, "frames": T,
                "counts": {"train": n, "val": 0, "test": 0},
                "classes": [f"row {i}" for i in range(n)],
                "fields": list(FIELDS), "shards": {"train": entries, "val": [], "test": []}}
    shards.write_json_atomic(root / "manifest.json", manifest)
    return root, data


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    return _handmade(tmp_path_factory.mktemp("reader") / "d")


@pytest.fixture
def opened(monkeypatch):
    """The shard files the reader opens, in order."""
    seen, real = [], shards.open_shard

    def spy(path):
        seen.append(path.name)
        return real(path)
    monkeypatch.setattr(shards, "open_shard", spy)
    return seen


def _edit_manifest(root, edit):
    m = json.loads((root / "manifest.json").read_text())
    edit(m)
    (root / "manifest.json").write_text(json.dumps(m))


def test_fields_and_limits(made):
    root, data = made
    whole = read_split(root, "train", FIELDS)
    for name in FIELDS:
        assert whole[name].dtype == data[name].dtype and np.array_equal(whole[name], data[name])
    seven = read_split(root, "train", ("label", "frames"), limit=7)  # across a shard boundary
    assert np.array_equal(seven["frames"], data["frames"][:7])
    assert list(seven["label"]) == [*range(7)]
    assert len(read_split(root, "train", ("label",), limit=100)["label"]) == 12
    empty = read_split(root, "train", ("frames",), limit=0)["frames"]
    assert empty.shape == (0, T, SIZE, SIZE, 3)
    assert open_split(root, "val").read(("frames",))["frames"].shape[0] == 0


def test_frame_ranges(made):
    root, data = made
    part = open_split(root, "train")
    psd = part.read(("frames", "flow"), t={"frames": slice(0, 2), "flow": 0})
    assert np.array_equal(psd["frames"], data["frames"][:, :2])
    assert np.array_equal(psd["flow"], data["flow"][:, 0]) and psd["flow"].shape == (12, 8, 8, 2)
    assert np.array_equal(part.read(("frames",), t={"frames": -1})["frames"], data["frames"][:, 2])
    late = part.read(("frames",), 4, t={"frames": slice(1, None)})["frames"]
    assert np.array_equal(late, data["frames"][:4, 1:])
    assert np.array_equal(part.read(("frames",), t={"frames": slice(0, 3, 2)})["frames"],
                          data["frames"][:, ::2])


@pytest.mark.parametrize("limit, world, rows, files", [
    (11, 2, [(0, 5), (5, 10)], [["shard-00000.h5"], ["shard-00001.h5", "shard-00002.h5"]]),
    (None, 3, [(0, 4), (4, 8), (8, 12)],
     [["shard-00000.h5"], ["shard-00000.h5", "shard-00001.h5"],
      ["shard-00001.h5", "shard-00002.h5"]]),
    (12, 5, [(0, 2), (2, 4), (4, 6), (6, 8), (8, 10)],
     [["shard-00000.h5"], ["shard-00000.h5"], ["shard-00000.h5", "shard-00001.h5"],
      ["shard-00001.h5"], ["shard-00001.h5", "shard-00002.h5"]]),
])
def test_a_rank_reads_its_rows_from_the_shards_that_hold_them(made, opened, limit, world, rows,
                                                             files):
    root, data = made
    part = open_split(root, "train")
    for rank in range(world):
        del opened[:]
        assert part.rows(limit, rank, world) == rows[rank]
        got = part.read(("label", "frames"), limit, rank=rank, world=world)
        lo, hi = rows[rank]
        assert list(got["label"]) == [*range(lo, hi)]
        assert np.array_equal(got["frames"], data["frames"][lo:hi])
        assert opened == files[rank]


@pytest.mark.parametrize("chunk", [1, 2, 3, 4, 7])
def test_chunked_reading_equals_unchunked(made, chunk):
    root, _ = made
    part = open_split(root, "train")
    ask = dict(t={"frames": slice(0, 2)}, dtypes={"flow": np.float16}, rank=1, world=2)
    whole = part.read(FIELDS, 11, **ask)  # rows 5..9
    assert np.array_equal(part.read(FIELDS, 11, chunk=chunk, **ask)["flow"], whole["flow"])
    pieces = list(part.chunks(FIELDS, 11, chunk=chunk, **ask))
    starts = [at for at, _ in pieces]
    sizes = [len(p["label"]) for _, p in pieces]
    assert starts == list(np.cumsum([0] + sizes[:-1])) and sum(sizes) == 5
    assert max(sizes) <= chunk
    for at, n in zip(starts, sizes):  # no piece spans two shards (5 + at is the split's row)
        assert not any(5 + at < b < 5 + at + n for b in BOUNDS)
    for name in FIELDS:
        joined = np.concatenate([p[name] for _, p in pieces])
        assert joined.dtype == whole[name].dtype and np.array_equal(joined, whole[name])


def test_a_dtype_is_converted_on_the_way_in(made):
    root, data = made
    for chunk in (None, 2):
        flow = open_split(root, "train").read(("flow",), t={"flow": 0},
                                              dtypes={"flow": np.float16}, chunk=chunk)["flow"]
        assert flow.dtype == np.float16
        want = data["flow"][:, 0].astype(np.float16)
        assert np.array_equal(flow.view(np.uint16), want.view(np.uint16))  # bit for bit
    first = next(open_split(root, "train").chunks(("flow",), dtypes={"flow": "float16"}))[1]
    assert first["flow"].dtype == np.float16 and first["flow"].shape == (5, T - 1, SIZE, SIZE, 2)


def test_pairs_of_three_frame_clips(made):
    root, data = made
    clips = read_split(root, "train", ("frames",), limit=4)["frames"]  # (4, 3, 8, 8, 3)
    got = pairs(clips)
    assert got.shape == (8, 2, SIZE, SIZE, 3) and got.dtype == np.uint8
    want = np.array([clips[n, [i, i + 1]] for n in range(4) for i in range(T - 1)])
    assert np.array_equal(got, want)
    two = clips[:, :2].copy()
    assert pairs(two) is two  # two-frame clips are already pairs
    with pytest.raises(GeogenError, match="1 frame give no pairs"):
        pairs(clips[:, :1])


def test_geodataset_reads_what_read_split_reads(made):
    root, data = made
    ds = GeoDataset(root, "train", FIELDS)
    assert len(ds) == 12
    item = ds[6]  # in the second shard
    assert np.array_equal(item["frames"].numpy(), data["frames"][6]) and int(item["label"]) == 6
    assert item["label"].shape == ()


def _one_line_error(call, match):
    with pytest.raises(GeogenError, match=match) as err:
        call()
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("call, match", [
    (lambda r: read_split(r / "nothing", "train", ("frames",)),
     r"nothing is not a geogen dataset \(no manifest.json\)"),
    (lambda r: read_split(r, "training", ("frames",)), "unknown split 'training'"),
    (lambda r: read_split(r, "train", ("nope",)), "field 'nope' is not stored here"),
    (lambda r: read_split(r, "train", ("amodal",)), "field 'amodal' is not stored here"),
    (lambda r: read_split(r, "train", ("frames",), limit=-1), "limit must be >= 0"),
    (lambda r: open_split(r, "train").read(("frames",), rank=2, world=2), "rank 2 of 2"),
    (lambda r: open_split(r, "train").read(("frames",), world=0), "rank 0 of 0"),
    (lambda r: open_split(r, "train").chunks(("frames",), chunk=0), "chunk must be >= 1"),
    (lambda r: open_split(r, "train").read(("label",), t={"label": 0}), "no frame axis"),
    (lambda r: open_split(r, "train").read(("flow",), t={"flow": 2}), "outside its 2 frames"),
    (lambda r: open_split(r, "train").read(("frames",), t={"frames": slice(3, 5)}),
     "select none"),
    (lambda r: open_split(r, "train").read(("frames",), t={"frames": slice(None, None, -1)}),
     "forward slice"),
    (lambda r: open_split(r, "train").read(("frames",), t={"flow": 0}), "which is not read"),
    (lambda r: open_split(r, "train").read(("flow",), dtypes={"flow": "nonsense"}),
     "not a dtype"),
])
def test_bad_requests_are_one_line_errors(made, call, match):
    _one_line_error(lambda: call(made[0]), match)


def test_broken_shards_are_one_line_errors(tmp_path):
    root, _ = _handmade(tmp_path / "d")
    path = root / "train" / "shard-00001.h5"
    import h5py  # the test finds where the first compressed chunk of frames lies
    with h5py.File(path, "r") as f:
        info = f["frames"].id.get_chunk_info(0)
    raw = bytearray(path.read_bytes())
    raw[info.byte_offset:info.byte_offset + info.size] = b"\xff" * info.size
    path.write_bytes(bytes(raw))
    assert len(read_split(root, "train", ("frames",), limit=5)["frames"]) == 5  # shard 0 only
    _one_line_error(lambda: read_split(root, "train", ("frames",)), "shard-00001.h5: cannot read")
    _one_line_error(lambda: list(open_split(root, "train").chunks(("frames",))), "cannot read")
    path.write_bytes(bytes(raw[:300]))  # truncated
    _one_line_error(lambda: read_split(root, "train", ("label",)), "shard-00001.h5: cannot")
    path.write_text("not a shard")
    _one_line_error(lambda: read_split(root, "train", ("label",)), "cannot open shard")


@pytest.mark.parametrize("edit, match", [
    # The split's count raised alone: the rows past the shards' would be handed out unread.
    (lambda m: m["counts"].update(train=15), "counts 15 train samples but its shards list 12"),
    # The count of a shard raised with it: the shard itself holds fewer rows.
    (lambda m: (m["counts"].update(train=14), m["shards"]["train"][1].update(count=6)),
     r"shard-00001.h5: 'frames' is uint8\[4, 3, 8, 8, 3\], the manifest says uint8\[6,"),
    (lambda m: m.pop("size"), "malformed"),
    (lambda m: m.update(frames=4), "'frames' is uint8"),
])
def test_a_manifest_that_promises_more_than_its_shards_hold_is_refused(tmp_path, edit, match):
    root, _ = _handmade(tmp_path / "d")
    _edit_manifest(root, edit)
    _one_line_error(lambda: read_split(root, "train", ("frames", "label")), match)
    if "shards list" not in match and "malformed" not in match:
        _one_line_error(lambda: [GeoDataset(root, "train")[i] for i in range(12)], match)

