"""Geo+'s looks: the paper's greyscale Brodatz-style bank by default, the former tinted look with
crops of the background photographs as "camouflage" (geogen.schema.LOOKS, docs/data.md)."""
import hashlib
import json

import numpy as np
import pytest
from click.testing import CliRunner

from geogen import shards, sources, textures
from geogen.cli import main
from geogen.errors import GeogenError
from geogen.make import MakeConfig, make_dataset, render_one, validate
from geogen.schema import LOOKS, PHOTO_VARIANTS, look_of
from geogen.variants import REGISTRY, get_variant, sample_rng
from test_geogen_plus import _make

# sha256 over every field (sorted by name) of samples made by the code before looks existed
# (commit bffafe9, MakeConfig(variant, n=8, size, seed=7) and its defaults): the former default.
FORMER = {
    ("geo+", 32, "train", 0): "745bfa6999c13933a90b7ba5d07e99bfc512f2e73c348d967ab3e300c12c9e6e",
    ("geo+", 32, "test", 3): "afc2dedacaaadfe8ac8de45a2fca49a5ad4deba05b9d0c6dac93067525b5814e",
    ("geo+", 64, "train", 5): "6c0773fc94af7c297731bc67f6643c0707def2b5e96420cd292c222b7e65062e",
    ("articulated+", 32, "train", 0):
        "f1f1ee3ea1132ded1da612b7b26b8a8d99b9c84dcdfb3ca85813a2741d6052ee",
}


def _sample_sha(sample: dict) -> str:
    h = hashlib.sha256()
    for k in sorted(sample):
        h.update(k.encode())
        h.update(np.ascontiguousarray(sample[k]).tobytes())
    return h.hexdigest()


@pytest.mark.parametrize("key", sorted(FORMER))
def test_camouflage_is_the_former_default_byte_for_byte(key):
    variant, size, split, index = key
    cfg = MakeConfig(variant=variant, n=8, size=size, seed=7, look="camouflage")
    assert _sample_sha(render_one(cfg, split, index)) == FORMER[key]
    paper = MakeConfig(variant=variant, n=8, size=size, seed=7)
    assert _sample_sha(render_one(paper, split, index)) != FORMER[key]  # the default changed


def test_the_paper_bank_holds_at_least_30_distinct_greyscale_sources():
    bank = sources.default_textures()
    assert len(bank) >= 30 and len(set(bank.names)) == len(bank)
    assert bank.names[:3] == ("brick", "grass", "gravel")
    assert all(bank.grey)
    for image in bank.images:
        assert image.dtype == np.float32 and 0.0 <= image.min() and image.max() <= 1.0
        assert np.array_equal(image[..., 0], image[..., 2])  # grey: three equal channels
    grey = np.stack([sources._shrink_array(im, 64)[:64, :64, 0] for im in bank.images])
    flat = grey.reshape(len(bank), -1)
    corr = np.corrcoef(flat)[~np.eye(len(bank), dtype=bool)]
    assert np.abs(corr).max() < 0.95, "two sources are the same texture"
    # Told apart by their grey levels too, not only by pattern.
    means, stds = flat.mean(1), grey.std(axis=(1, 2))
    assert means.max() - means.min() > 0.3 and stds.max() / stds.min() > 2.0


def _crop_of(texture: np.ndarray, photo: np.ndarray, run: int = 8) -> bool:
    """Whether the texture's central `run` pixels of one row lie, exactly, side by side in a
    row of the photograph (a crop at the photo's own scale, as the camouflage bank's are)."""
    seg = texture[texture.shape[0] // 2, texture.shape[1] // 2:][:run]  # (run, 3)
    rows, cols = np.nonzero(np.all(photo == seg[0], axis=-1))
    keep = cols + run <= photo.shape[1]
    rows, cols = rows[keep], cols[keep]
    for k in range(1, run):
        same = np.all(photo[rows, cols + k] == seg[k], axis=-1)
        rows, cols = rows[same], cols[same]
    return len(rows) > 0


def test_no_paper_texture_is_a_background_photo_or_a_crop_of_one():
    backgrounds = sources.default_backgrounds()
    paper = sources.default_textures(look="paper")
    photos = set(backgrounds.names)
    assert not any(name in photos or name.split("_")[0] in photos for name in paper.names)
    found = {t for t, tex in zip(paper.names, paper.images)
             for photo in backgrounds.images if _crop_of(tex, photo)}
    assert found == set()
    # The check finds the camouflage bank's crops of the photographs.
    camouflage = sources.default_textures(look="camouflage")
    found = {t for t, tex in zip(camouflage.names, camouflage.images)
             for photo in backgrounds.images if _crop_of(tex, photo)}
    assert found == {"chelsea_fur", "flower_petals", "immunohistochemistry", "camera_lawn",
                     "china_foliage"}


def test_the_texture_bank_is_the_same_bytes_on_every_build():
    first = [(n, im.tobytes()) for n, im in textures.texture_bank()]
    textures.texture_bank.cache_clear()
    again = [(n, im.tobytes()) for n, im in textures.texture_bank()]
    assert first == again
    name = next(iter(textures.REGISTRY))
    assert textures.make_texture(name).tobytes() == dict(again)[name]


def test_a_shapes_texture_is_rarely_shared_with_another_shape_or_its_background():
    cfg = MakeConfig(variant="geo+", n=1, size=32)
    bank = sources.default_textures()
    pairs = shared = 0
    for i in range(300):
        scene, _ = get_variant("geo+").draw(sample_rng(0, "train", i), cfg)
        tex = [int(t) for t in scene.extra["tex_source"] if t >= 0]
        for a in range(len(tex)):
            for b in range(a + 1, len(tex)):
                pairs += 1
                shared += tex[a] == tex[b]
    assert shared / pairs < 0.06  # 1 / 37 expected; the former default's 8 sources gave 12%
    assert len(bank) >= 30


TINY = dict(n=4, val=0, test=2)  # a few samples of test_geogen_plus's 32 px set


def test_the_manifest_says_which_look_the_data_has(tmp_path):
    paper = shards.read_manifest(_make(tmp_path, "paper", **TINY))
    assert paper["config"]["look"] == "paper" == look_of(paper)
    assert paper["sources"]["textures"]["source"] == "default:greyscale-textures"
    assert paper["sources"]["texture_config"]["tint_grey"] is False
    camouflage = shards.read_manifest(_make(tmp_path, "camo", look="camouflage", **TINY))
    assert camouflage["config"]["look"] == "camouflage" == look_of(camouflage)
    assert camouflage["sources"]["textures"]["source"] == "default:textures"
    assert camouflage["sources"]["texture_config"]["tint_grey"] is True
    # The same draws in both: the scene, masks and flow agree, the pixels do not.
    assert paper["shards"] != camouflage["shards"]
    # Geo has no textures: no look, so its manifests stay as they were.
    geo = MakeConfig(variant="geo", n=4).content()
    assert "look" not in geo and look_of({"variant": "geo", "config": geo}) is None
    # A Geo+ manifest without a look was made before looks: the camouflage look.
    assert look_of({"variant": "geo+", "config": {}}) == "camouflage"
    assert set(PHOTO_VARIANTS) == {n for n, v in REGISTRY.items() if v.sources is not None}


def test_two_builds_of_the_paper_look_are_byte_identical(tmp_path):
    one, two = _make(tmp_path, "one", **TINY), _make(tmp_path, "two", **TINY)
    assert shards.read_manifest(one)["shards"] == shards.read_manifest(two)["shards"]


def test_a_bad_look_is_one_line_at_the_boundary(tmp_path):
    with pytest.raises(GeogenError, match=r"^look must be one of paper, camouflage, got 'tinted'$"):
        validate(MakeConfig(variant="geo+", n=1, look="tinted"))
    with pytest.raises(GeogenError, match=r"^--look applies to geo\+ and articulated\+, not geo$"):
        validate(MakeConfig(variant="geo", n=1, look="camouflage"))
    runner = CliRunner()
    out = tmp_path / "x"
    res = runner.invoke(main, ["make", "--variant", "geo", "--n", "1", "--look", "camouflage",
                               "--out", str(out)])
    assert res.exit_code == 1 and res.output.strip().splitlines() == [
        "Error: --look applies to geo+ and articulated+, not geo"]
    assert not out.exists()
    res = runner.invoke(main, ["make", "--variant", "geo+", "--n", "1", "--look", "tinted",
                               "--out", str(out)])
    assert res.exit_code == 2 and "'paper', 'camouflage'" in res.output
    assert "Traceback" not in res.output and not out.exists()
    assert tuple(LOOKS) == ("paper", "camouflage")


def test_a_folder_of_the_former_look_is_not_finished_as_the_papers(tmp_path):
    """A Geo+ run made before looks were recorded (its run.json has no look) is another
    setting: `make --resume` of the default look refuses it rather than mixing the two."""
    root = _make(tmp_path, "old", look="camouflage", **TINY)
    for name in ("run.json", "manifest.json"):
        record = json.loads((root / name).read_text())
        config = record.get("config", record)
        del config["look"]
        (root / name).write_text(json.dumps(record))
    args = dict(variant="geo+", size=32, out=str(root), workers=1, shard_size=8, **TINY)
    with pytest.raises(GeogenError, match="made with other settings"):
        make_dataset(MakeConfig(**args), resume=True, progress=False)
