"""Values off the data contract (geogen.schema.value_problem): NaN or inf flow and poses, a
label past the classes, a visible value naming no slot, a manifest of an unknown variant or
malformed slots. `geogen verify` lists them; the one reader refuses them in one line naming the
folder, shard, field and value, so that no method trains on them."""
import json
import shutil

import h5py
import numpy as np
import pytest
from click.testing import CliRunner

from geogen import schema, shards
from geogen.cli import main
from geogen.dataset import GeoDataset, open_split, read_split
from geogen.errors import GeogenError
from geogen.make import MakeConfig, make_dataset

SHARD = "train/shard-00000.h5"


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    out = tmp_path_factory.mktemp("values") / "d"
    return make_dataset(MakeConfig(n=20, val=0, test=4, size=32, out=str(out), workers=1,
                                   shard_size=16), progress=False)


def _written_with(made, dst, edit):
    """A copy of `made` whose first train shard was written (by geogen's writer, so its
    checksums agree with it) from arrays that `edit` changed."""
    shutil.copytree(made, dst)
    path = dst / SHARD
    with h5py.File(path, "r") as f:
        arrays = {name: f[name][()] for name in f}
        attrs = {k: v for k, v in f.attrs.items() if k != "count"}
    edit(arrays)
    for old in dst.glob(f"{SHARD}*"):  # the shard and its sidecar
        old.unlink()
    sha = shards.write_arrays(path, arrays, 2, 32, attrs)
    m = shards.read_manifest(dst)
    m["shards"]["train"][0]["sha256"] = sha
    shards.write_json_atomic(dst / "manifest.json", m)
    return dst


def _set(field, index, value):
    def edit(arrays):
        arrays[field][index] = value
    return edit


CASES = {
    "nan flow": ("flow", _set("flow", (2, 0, 5, 7, 1), np.nan), "holds nan at sample 2"),
    "inf flow": ("flow", _set("flow", (3, 0, 0, 0, 0), np.inf), "holds inf at sample 3"),
    "inf backward flow": ("flow_bw", _set("flow_bw", (1, 0, 9, 9, 0), -np.inf),
                          "holds -inf at sample 1"),
    "nan pose": ("pose", _set("pose", (4, 1, 2, 0), np.nan), "holds nan at sample 4"),
    "size 0": ("pose", _set("pose", (4, 1, 2, 3), 0.0), "holds a size 0.0 <= 0 at sample 4"),
    "label 99": ("label", _set("label", 5, 99), "holds 99, outside 0..3"),
    "label -1": ("label", _set("label", 5, -1), "holds -1, outside 0..3"),
    "visible 200": ("visible", _set("visible", (6, 1, 3, 3), 200), "holds 200, outside 0..3"),
}


@pytest.mark.parametrize("case", CASES)
def test_verify_and_the_reader_refuse_values_off_the_contract(made, tmp_path, case):
    field, edit, words = CASES[case]
    bad = _written_with(made, tmp_path / "bad", edit)
    res = CliRunner().invoke(main, ["verify", str(bad)])
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    assert f"{SHARD}: field {field!r} {words}" in res.output, res.output
    for read in (lambda: read_split(bad, "train", ("frames", field)),
                 lambda: read_split(bad, "train", (field,), limit=8),
                 lambda: open_split(bad, "train").read((field,), dtypes={field: np.float64}),
                 lambda: list(open_split(bad, "train").chunks((field,), chunk=3)),
                 lambda: [GeoDataset(bad, "train", (field,))[i] for i in range(16)]):
        with pytest.raises(GeogenError) as err:
            read()
        message = str(err.value)
        assert len(message.splitlines()) == 1
        assert str(bad / SHARD) in message and f"field {field!r} {words}" in message, message
    # What is right is still read: other fields, and the shards after the bad one.
    assert len(read_split(bad, "train", ("frames",))["frames"]) == 20
    assert len(open_split(bad, "test").read((field,))[field]) == 4


def test_info_refuses_a_label_past_the_classes(made, tmp_path):
    bad = _written_with(made, tmp_path / "bad", _set("label", 5, 99))
    res = CliRunner().invoke(main, ["info", str(bad)])
    assert res.exit_code == 1 and len(res.output.strip().splitlines()) == 1, res.output
    assert "field 'label' holds 99" in res.output


@pytest.mark.parametrize("edit, words", [
    (lambda m: m.update(variant="mnist"), "names variant 'mnist'"),
    (lambda m: m.update(slots=["circle", "circle", "triangle"]), "malformed slots"),
    (lambda m: m.update(slots=[]), "malformed slots"),
    (lambda m: m.update(classes=["one", 2]), "malformed classes"),
])
def test_a_manifest_of_an_unknown_variant_or_malformed_slots_is_refused(made, tmp_path, edit,
                                                                        words):
    bad = tmp_path / "bad"
    shutil.copytree(made, bad)
    m = json.loads((bad / "manifest.json").read_text())
    edit(m)
    (bad / "manifest.json").write_text(json.dumps(m))
    res = CliRunner().invoke(main, ["verify", str(bad)])
    assert res.exit_code == 1 and words in res.output and "Traceback" not in res.output
    with pytest.raises(GeogenError, match=words):
        open_split(bad, "train")


def test_the_data_geogen_makes_passes(made):
    assert shards.verify(made) == []
    assert len(read_split(made, "train", schema.REQUIRED_FIELDS)["label"]) == 20
