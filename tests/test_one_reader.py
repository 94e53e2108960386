"""The trainers' readers are thin calls of geogen's: each returns what its own shard loop
returned (bit for bit), keeps its error class, and nothing outside geogen opens a shard."""
import ast
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from baselines.psd import PsdError
from baselines.psd.data import load_train
from baselines.rnem import ModelConfig, RnemError, TrainConfig
from baselines.rnem.trainer import load_clips
from baselines.scae import ScaeError
from baselines.scae.data import load_images
from flowcaps import FlowcapsError
from flowcaps.trainer import _split_shards, load_pairs
from geogen import shards
from geogen.make import MakeConfig, make_dataset

REPO = Path(__file__).resolve().parents[1]
RNEM = TrainConfig().replace(model=ModelConfig(image_size=32, work_size=16, enc_channels=(4, 8, 8),
                                               enc_hidden=12, state_size=10, rel_hidden=8,
                                               att_hidden=6, dec_hidden=12, em_steps=2),
                             clip_frames=3, max_clips=13, device="cpu")


@pytest.fixture(scope="module")
def clips3(tmp_path_factory):
    """Three-frame clips at 32 px, train in shards of 8, 8 and 4."""
    out = tmp_path_factory.mktemp("clips3") / "d"
    return make_dataset(MakeConfig(n=20, val=0, test=5, size=32, frames=3, seed=2, out=str(out),
                                   workers=1, shard_size=8), progress=False)


def _stored(root, split, name):
    """The whole field as the shards hold it, read with geogen's own shard open."""
    m = shards.read_manifest(root)
    parts = []
    for path, _ in shards.shard_paths(root, m, split):
        with shards.open_shard(path) as f:
            parts.append(f[name][()])
    return np.concatenate(parts)


def _same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(
        a.view(np.uint8), b.view(np.uint8))


def test_flowcaps_pairs_and_shard_list(clips3):
    frames = _stored(clips3, "train", "frames")  # (20, 3, 32, 32, 3)
    for limit, rank, world in [(None, 0, 1), (17, 1, 2), (None, 2, 3)]:
        share = (20 if limit is None else limit) // world
        mine = frames[rank * share:(rank + 1) * share]
        want = np.array([clip[[i, i + 1]] for clip in mine for i in range(2)])
        assert _same(load_pairs(clips3, "train", limit, rank, world), want)
    manifest, parts = _split_shards(clips3, "train")
    assert manifest == shards.read_manifest(clips3)
    assert parts == shards.shard_paths(clips3, manifest, "train")
    assert [n for _, n in parts] == [8, 8, 4]


def test_psd_pairs_and_half_precision_flow(clips3):
    frames, flow = load_train(clips3, limit=11)
    assert _same(frames, _stored(clips3, "train", "frames")[:11, :2])
    assert _same(flow, _stored(clips3, "train", "flow")[:11, 0].astype(np.float16))


def test_rnem_clips_cut_and_pooled(clips3):
    x = torch.from_numpy(_stored(clips3, "train", "frames")[:13, :3])  # (13, 3, 32, 32, 3)
    x = x.permute(0, 1, 4, 2, 3).float()  # (13, 3, 3, 32, 32)
    x = F.avg_pool2d(x.flatten(0, 1), 2).view(13, 3, 3, 16, 16)
    want = x.round().clamp(0, 255).to(torch.uint8).numpy()
    assert _same(load_clips(clips3, RNEM), want)
    assert _same(load_clips(clips3, RNEM.replace(clip_frames=2, max_clips=None))[:13, :2],
                 want[:, :2])


def test_scae_frame_zero(clips3):
    assert _same(load_images(clips3, "train", 9), _stored(clips3, "train", "frames")[:9, 0])
    assert _same(load_images(clips3, "test"), _stored(clips3, "test", "frames")[:, 0])


WRAPPERS = [
    (FlowcapsError, lambda root, **kw: load_pairs(root, "train", kw.get("limit"))),
    (FlowcapsError, lambda root, **kw: _split_shards(root, "train")),
    (PsdError, lambda root, **kw: load_train(root, kw.get("limit"))),
    (RnemError, lambda root, **kw: load_clips(root, RNEM.replace(max_clips=kw.get("limit")))),
    (ScaeError, lambda root, **kw: load_images(root, "train", kw.get("limit"))),
]


@pytest.mark.parametrize("error, call", WRAPPERS)
def test_each_wrapper_keeps_its_error_class_and_one_line(clips3, tmp_path, error, call):
    def one_line(match, root, **kw):
        with pytest.raises(error, match=match) as err:
            call(root, **kw)
        assert "\n" not in str(err.value)

    one_line("not a geogen dataset", tmp_path / "nothing")
    if call is not WRAPPERS[1][1]:  # the shard list reads no rows
        one_line("limit must be >= 0", clips3, limit=-1)
    edited = tmp_path / "edited"
    shutil.copytree(clips3, edited)
    m = json.loads((edited / "manifest.json").read_text())
    m["counts"]["train"] = 30
    (edited / "manifest.json").write_text(json.dumps(m))
    one_line("counts 30 train samples but its shards list 20", edited)


SCANNED = ("flowcaps", "baselines", "benchmark", "scripts")


def shard_access(source: str) -> list[str]:
    """Where a module imports h5py or names geogen's open_shard: 'line: what'."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names
                      if a.name.split(".")[0] == "h5py"]
        elif isinstance(node, ast.ImportFrom):
            if (node.module or "").split(".")[0] == "h5py":
                found.append(f"{node.lineno}: from {node.module} import")
            found += [f"{node.lineno}: imports open_shard" for a in node.names
                      if a.name == "open_shard"]
        elif isinstance(node, ast.Attribute) and node.attr == "open_shard":
            found.append(f"{node.lineno}: .open_shard")
        elif isinstance(node, ast.Name) and node.id == "open_shard":
            found.append(f"{node.lineno}: open_shard")
    return found


def test_the_scan_sees_each_kind_of_access():
    assert shard_access("import h5py") and shard_access("import h5py.h5f as x")
    assert shard_access("from h5py import File")
    assert shard_access("from geogen.shards import open_shard")
    assert shard_access("def f(p):\n    from geogen import shards\n    return shards.open_shard(p)")
    assert not shard_access("from geogen.dataset import read_split\nread_split('d', 'test', ())")


def test_no_module_outside_geogen_opens_a_shard():
    files = [p for d in SCANNED for p in sorted((REPO / d).rglob("*.py"))]
    assert len(files) > 40  # the scan found the packages
    bad = [f"{p.relative_to(REPO)}:{hit}" for p in files for hit in shard_access(p.read_text())]
    assert bad == [], "read shards through geogen.dataset: " + "; ".join(bad)
