"""`geogen make --part I/N` on several machines and `geogen merge`: the same bytes as one run."""
import json
import subprocess
import sys

import h5py
import pytest
from click.testing import CliRunner

from geogen import shards
from geogen.cli import main
from geogen.parts import parse_part

# 40 + 6 + 10 samples in shards of 16: 3 + 1 + 1 shards, so part 1/2 takes train 0, 2 and test
# 0, part 2/2 train 1 and val 0.
ARGS = ["--n", "40", "--val", "6", "--test", "10", "--size", "32", "--shard-size", "16",
        "--workers", "1", "--quiet"]


def _geogen(*args):
    return CliRunner().invoke(main, [*map(str, args)])


def _files(root):
    """Every file under root (relative path -> bytes)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def test_two_parts_and_the_merge_equal_a_one_part_run(tmp_path):
    one, split = tmp_path / "one", tmp_path / "split"
    assert _geogen("make", *ARGS, "--out", one).exit_code == 0
    res = _geogen("make", *ARGS, "--out", split, "--part", "2/2")
    assert res.exit_code == 0, res.output
    assert "geogen merge" in res.output and not (split / "manifest.json").exists()
    marker = json.loads((split / "parts" / "part-2-of-2.json").read_text())
    assert [e["file"] for e in marker["shards"]] == ["train/shard-00001.h5", "val/shard-00000.h5"]
    res = _geogen("merge", split)  # part 1 is missing
    assert res.exit_code == 1 and "part(s) 1/2 not finished yet" in res.output
    assert _geogen("make", *ARGS, "--out", split, "--part", "1/2").exit_code == 0
    res = _geogen("merge", split)
    assert res.exit_code == 0, res.output
    assert shards.manifest_hash(split) == shards.manifest_hash(one)
    assert _files(split) == _files(one)  # shards, run.json and manifest; no part markers left
    res = _geogen("merge", split)
    assert res.exit_code == 1 and "nothing to merge" in res.output


def test_parts_made_at_once_by_three_processes_merge_to_the_same_bytes(tmp_path):
    """Three "machines" at once on one folder: none removes or overwrites another's files."""
    one, split = tmp_path / "one", tmp_path / "split"
    assert _geogen("make", *ARGS, "--out", one).exit_code == 0
    procs = [subprocess.Popen([sys.executable, "-m", "geogen.cli", "make", *ARGS, "--out",
                               str(split), "--part", f"{i}/3"], stderr=subprocess.PIPE, text=True)
             for i in (1, 2, 3)]
    errors = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], errors
    assert _geogen("merge", split).exit_code == 0
    assert _files(split) == _files(one)


def test_a_part_joins_a_folder_where_another_part_is_writing_its_run_record(tmp_path):
    """What a part starting a moment after another finds: the other's run.json temporary and
    nothing else (the record is written before any split folder), which is no foreign data."""
    split = tmp_path / "split"
    split.mkdir()
    (split / "run.json.othermachine-123.tmp").write_text("{")
    res = _geogen("make", *ARGS, "--out", split, "--part", "1/2")
    assert res.exit_code == 0, res.output
    (split / "stray.txt").write_text("not geogen's")  # foreign data is still refused
    other = tmp_path / "other"
    other.mkdir()
    (other / "stray.txt").write_text("not geogen's")
    res = _geogen("make", *ARGS, "--out", other, "--part", "1/2")
    assert res.exit_code == 1 and "no geogen run recorded" in res.output


def test_a_changed_shard_or_other_settings_are_refused_at_the_merge(tmp_path):
    out = tmp_path / "d"
    for i in (1, 2):
        assert _geogen("make", *ARGS, "--out", out, "--part", f"{i}/2").exit_code == 0
    shard = out / "val" / "shard-00000.h5"
    shard.write_bytes(shard.read_bytes() + b"\0")  # still a readable shard, other bytes
    res = _geogen("merge", out)
    assert res.exit_code == 1 and "changed since its part finished" in res.output
    assert not (out / "manifest.json").exists()
    res = _geogen("make", *ARGS[:-1], "--seed", "1", "--quiet", "--out", out, "--part", "1/2")
    assert res.exit_code == 1 and "other settings" in res.output


def _edit_label(path):
    with h5py.File(path, "r+") as f:   # a readable shard of the same samples, one value changed
        f["label"][0] = (f["label"][0] + 1) % 4


def _other_seeds_shard(path):
    other = path.parents[2] / "seed1"
    _geogen("make", *ARGS, "--seed", "1", "--out", other)
    path.write_bytes((other / path.relative_to(path.parents[1])).read_bytes())


def _appended(path):
    path.write_bytes(path.read_bytes() + b"\0")


@pytest.mark.parametrize("change", [_edit_label, _other_seeds_shard, _appended])
def test_a_part_made_again_after_its_shard_changed_merges_to_the_one_part_run(tmp_path, change):
    """The merge's advice followed: the part made again remakes the changed shard (it is not
    judged whole by its index range), so the merge gives the one-part run's bytes."""
    one, split = tmp_path / "one", tmp_path / "split"
    assert _geogen("make", *ARGS, "--out", one).exit_code == 0
    for i in (1, 2):
        assert _geogen("make", *ARGS, "--out", split, "--part", f"{i}/2").exit_code == 0
    change(split / "train" / "shard-00000.h5")  # part 1's
    res = _geogen("merge", split)
    assert res.exit_code == 1 and "changed since its part finished" in res.output, res.output
    assert "make that part again" in res.output
    assert _geogen("make", *ARGS, "--out", split, "--part", "1/2").exit_code == 0
    res = _geogen("merge", split)
    assert res.exit_code == 0, res.output
    assert _files(split) == _files(one)
    assert _geogen("verify", split).exit_code == 0


@pytest.mark.parametrize("spec", ["0/2", "3/2", "x", "1/0", "1/2/3", "-1/2"])
def test_a_bad_part_spec_is_one_line(tmp_path, spec):
    res = _geogen("make", *ARGS, "--out", tmp_path / "d", "--part", spec)
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert res.output.strip() == (f"Error: --part must be I/N with 1 <= I <= N (e.g. 1/4), "
                                  f"got {spec!r}")
    assert not (tmp_path / "d").exists()


def test_part_with_force_and_merge_of_a_plain_folder_are_one_line(tmp_path):
    res = _geogen("make", *ARGS, "--out", tmp_path / "d", "--part", "1/2", "--force")
    assert res.exit_code == 1 and "--force with --part" in res.output
    res = _geogen("merge", tmp_path)
    assert res.exit_code == 1 and "no run.json" in res.output
    assert parse_part("3/4").takes(2) and not parse_part("3/4").takes(3)
