"""geogen under faults and odd requests: Ctrl-C, a full disk, image types, big sheets,
choices and worker counts. Each answer is one line; nothing half-written looks whole."""
import errno
import os
import signal
import threading
import time

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

from geogen import make, room, shards
from geogen.cli import default_out, main
from geogen.make import MakeConfig, make_dataset
from geogen.sheet import MAX_SIDE

_real_render = make._render_unit
ARGS = ["make", "--n", "40", "--val", "0", "--test", "8", "--size", "32", "--shard-size", "16",
        "--quiet"]


def _interrupt_self_then_render(unit):
    """A worker's unit after the worker got Ctrl-C (as every process of the terminal does)."""
    os.kill(os.getpid(), signal.SIGINT)
    return _real_render(unit)


def _hung(*_):
    raise RuntimeError("the parent waited a minute for its workers")


def _fail_on_call(n, error):
    calls = {"n": 0}
    real = shards.ShardWriter.write_chunk

    def write_chunk(self, *args):
        calls["n"] += 1
        if calls["n"] == n:
            raise error
        return real(self, *args)
    return write_chunk


def _leftovers(root):
    return sorted(p.name for p in root.rglob("*.tmp"))


def _shards_are_whole(root):
    for path in root.glob("*/shard-*.h5"):
        with shards.open_shard(path) as f:
            assert f["label"].shape[0] == int(f.attrs["count"])
            f["label"][-1:]  # the last chunk decompresses


def _kept_whole_then_resumed(root, monkeypatch):
    """A stopped run: no .tmp, no manifest, its shards whole; --resume then finishes it."""
    assert _leftovers(root) == [] and not (root / "manifest.json").exists()
    _shards_are_whole(root)
    monkeypatch.undo()
    res = CliRunner().invoke(main, ARGS + ["--out", str(root), "--resume", "--workers", "1"])
    assert res.exit_code == 0, res.output
    assert shards.verify(root) == []


@pytest.mark.parametrize("workers", ["1", "2"])
def test_ctrl_c_stops_cleanly_and_resume_finishes(tmp_path, monkeypatch, capfd, workers):
    root = tmp_path / "d"
    if workers == "2":  # the workers get Ctrl-C too; alone, a SIGINT would stop the test
        monkeypatch.setattr(make, "_render_unit", _interrupt_self_then_render)
    # The parent is interrupted while it writes the first shard.
    monkeypatch.setattr(shards.ShardWriter, "write_chunk",
                        _fail_on_call(2, KeyboardInterrupt()))
    # A worker killed by Ctrl-C would leave its unit unanswered and the parent waiting.
    before = signal.signal(signal.SIGALRM, _hung)
    signal.alarm(60)
    try:
        res = CliRunner().invoke(main, ARGS + ["--out", str(root), "--workers", workers])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)
    assert res.exit_code == 130, res.output
    assert "--resume" in res.output and len(res.output.strip().splitlines()) == 1
    err = capfd.readouterr().err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    _kept_whole_then_resumed(root, monkeypatch)


def _sigterm_self(*args):
    os.kill(os.getpid(), signal.SIGTERM)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_sigterm_stops_as_ctrl_c_does_and_resume_finishes(tmp_path, monkeypatch, capfd, workers):
    root = tmp_path / "d"
    calls = {"n": 0}
    real = shards.ShardWriter.write_chunk

    def write_chunk(self, *args):  # SIGTERM reaches the parent while it writes the first shard
        calls["n"] += 1
        if calls["n"] == 2:
            _sigterm_self()
        return real(self, *args)
    monkeypatch.setattr(shards.ShardWriter, "write_chunk", write_chunk)
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    res = CliRunner().invoke(main, ARGS + ["--out", str(root), "--workers", workers])
    assert res.exit_code == 143, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("terminated;") and "--resume" in lines[0]
    assert "Traceback" not in capfd.readouterr().err
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before, \
        "the handlers are the command's alone"
    _kept_whole_then_resumed(root, monkeypatch)


@pytest.mark.parametrize("sig, status, word", [(signal.SIGTERM, 143, "terminated"),
                                               (signal.SIGINT, 130, "interrupted")])
def test_a_signal_to_the_parent_alone_stops_it_cleanly(tmp_path, sig, status, word):
    """As `kill PID` sends it: SIGTERM once killed the parent at once, its workers then wrote
    into a closed pipe (BrokenPipe tracebacks) and the unfinished shard stayed; Ctrl-C, raised
    wherever it landed, left a .tmp when it cut an HDF5 write, or was swallowed by a weakref
    callback and the run went on. Both now stop between two units."""
    import subprocess
    import sys
    import time
    root = tmp_path / "d"
    proc = subprocess.Popen([sys.executable, "-m", "geogen.cli", "make", "--n", "20000",
                             "--val", "0", "--test", "0", "--size", "32", "--shard-size", "200",
                             "--workers", "2", "--quiet", "--out", str(root)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 60
        while not (root / "train" / shards.shard_name(0)).exists():
            assert proc.poll() is None and time.time() < deadline, "no shard was written"
            time.sleep(0.002)
        proc.send_signal(sig)  # while the parent writes the next shard
        out, err = proc.communicate(timeout=60)  # until every worker has closed stderr too
    finally:
        proc.kill()
    assert proc.returncode == status, err
    assert err.strip().splitlines() == [f"{word}; the whole shards in {root} are kept: "
                                        f"run the same command with --resume to finish"], err
    assert _leftovers(root) == [] and not (root / "manifest.json").exists()
    _shards_are_whole(root)


@pytest.mark.parametrize("where", ["chunk", "rename"])
def test_a_full_disk_is_one_line_and_leaves_no_partial_shard(tmp_path, monkeypatch, where):
    root = tmp_path / "d"
    full = OSError(errno.ENOSPC, "No space left on device")
    if where == "chunk":
        monkeypatch.setattr(shards.ShardWriter, "write_chunk", _fail_on_call(3, full))
    else:  # the shard is complete but cannot take its final name
        real = os.replace

        def replace(src, dst):
            if str(src).endswith(".h5.tmp"):
                raise full
            return real(src, dst)
        monkeypatch.setattr(shards.os, "replace", replace)
    res = CliRunner().invoke(main, ARGS + ["--out", str(root), "--workers", "1"])
    assert res.exit_code == 1
    assert "the disk is full" in res.output and "--resume" in res.output
    assert len(res.output.strip().splitlines()) == 1 and "Traceback" not in res.output
    assert _leftovers(root) == []
    _shards_are_whole(root)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    return make_dataset(MakeConfig(n=4, val=0, test=60, size=32, workers=1, shard_size=100,
                                   out=str(tmp_path_factory.mktemp("geo") / "d")), progress=False)


def test_show_writes_the_type_its_extension_names(small, tmp_path):
    for name, fmt in (("x.jpg", "JPEG"), ("x.JPEG", "JPEG"), ("x.png", "PNG")):
        res = CliRunner().invoke(main, ["show", str(small), "--index", "0-1", "-o",
                                        str(tmp_path / name)])
        assert res.exit_code == 0, res.output
        assert Image.open(tmp_path / name).format == fmt
    for name in ("x.foo", "x"):
        res = CliRunner().invoke(main, ["show", str(small), "-o", str(tmp_path / name)])
        assert res.exit_code == 1 and "unknown image type" in res.output
        assert len(res.output.strip().splitlines()) == 1 and not (tmp_path / name).exists()
    assert _leftovers(tmp_path) == []


def test_a_long_index_is_laid_out_in_blocks_and_capped(small, tmp_path, monkeypatch):
    monkeypatch.setattr("geogen.sheet.MAX_SIDE", 500)  # the titles, then 4 rows of 98 px
    out = tmp_path / "s.png"
    res = CliRunner().invoke(main, ["show", str(small), "--index", "0-59", "-o", str(out)])
    assert res.exit_code == 0, res.output
    sheet = np.asarray(Image.open(out))
    assert sheet.shape[0] <= 500 and sheet.shape[0] == 16 + 4 * 98 + 2
    # 15 blocks of 8 tiles, then the flow key
    assert sheet.shape[1] == 15 * (8 * 98 + 2 + 12) + 96 + 2
    monkeypatch.setattr("geogen.sheet.MAX_WIDTH", 3000)
    res = CliRunner().invoke(main, ["show", str(small), "--index", "0-59", "-o", str(out)])
    assert res.exit_code == 1 and "holds at most 12" in res.output
    res = CliRunner().invoke(main, ["show", str(small), "--index", "0-99999999", "-o", str(out)])
    assert res.exit_code == 1 and "more than 100000 samples" in res.output
    assert MAX_SIDE == 4096


@pytest.mark.parametrize("value", ["0", "-2", "1.5", "many"])
def test_workers_must_be_positive_or_auto(tmp_path, value):
    res = CliRunner().invoke(main, ARGS + ["--out", str(tmp_path / "o"), "--workers", value])
    assert res.exit_code == 1 and "--workers must be a positive integer or 'auto'" in res.output
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("option, known", [("--variant", "'articulated', 'articulated+', 'geo', 'geo+'"),
                                           ("--motion", "'translation', 'conformal'")])
def test_variant_and_motion_are_choices_listed_in_help(tmp_path, option, known):
    res = CliRunner().invoke(main, ARGS + ["--out", str(tmp_path / "o"), option, "nope"])
    assert res.exit_code == 2 and f"'nope' is not one of {known}" in res.output
    assert "Traceback" not in res.output and not (tmp_path / "o").exists()
    helptext = CliRunner().invoke(main, ["make", "--help"]).output
    assert "[articulated|articulated+|geo|geo+]" in helptext and "[translation|conformal]" in helptext


def test_the_default_out_follows_the_variant(tmp_path, monkeypatch):
    assert default_out("geo") == "data/geo" and default_out("geo+") == "data/geoplus"
    helptext = CliRunner().invoke(main, ["make", "--help"]).output
    assert "data/geoplus for geo+" in " ".join(helptext.split())
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, ["make", "--n", "4", "--val", "0", "--test", "0", "--size",
                                    "32", "--workers", "1", "--quiet"])
    assert res.exit_code == 0 and (tmp_path / "data" / "geo" / "manifest.json").exists()


def test_python_dash_m_runs_the_cli():
    """`python -m geogen.cli` is the command line, not a silent no-op (exit 0, nothing made)."""
    import subprocess
    import sys
    ok = subprocess.run([sys.executable, "-m", "geogen.cli", "make", "--help"],
                        capture_output=True, text=True)
    assert ok.returncode == 0 and "--variant" in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "geogen.cli", "make"], capture_output=True, text=True)
    assert bad.returncode != 0 and "--n" in bad.stderr


def _edited_copy(src, dst, edit):
    import json
    import shutil
    shutil.copytree(src, dst)
    m = json.loads((dst / "manifest.json").read_text())
    edit(m)
    (dst / "manifest.json").write_text(json.dumps(m))
    return dst


def _test_count(m, n, entry=None):
    m["counts"]["test"] = n
    if entry is not None:
        m["shards"]["test"][0]["count"] = entry


EDITS = {  # the small set's test split: 60 samples in one shard
    "counts past the shards": (lambda m: _test_count(m, 150), "counts 150 test samples but "
                                                               "its shards list 60"),
    "counts and shard entry": (lambda m: _test_count(m, 150, 150),
                               "'frames' is uint8[60, 2, 32, 32, 3], the manifest says "
                               "uint8[150, 2, 32, 32, 3]"),
    "a petabyte of counts": (lambda m: _test_count(m, 10 ** 15, 10 ** 15), "the manifest says"),
    "size 64": (lambda m: m.update(size=64), "2, 32, 32, 3], the manifest says uint8["),
    "size 0": (lambda m: m.update(size=0), "malformed (size 0, frames 2)"),
    "size abc": (lambda m: m.update(size="abc"), "malformed (ValueError"),
    "frames 3": (lambda m: m.update(frames=3), "2, 32, 32, 3], the manifest says uint8["),
    "a field the shards lack": (lambda m: m["fields"].append("bg_source"), "'bg_source'"),
    "no shard list": (lambda m: m.update(shards=None), "malformed (AttributeError"),
}


@pytest.mark.parametrize("case", sorted(EDITS))
def test_an_edited_manifest_is_one_line_for_info_show_and_verify(small, tmp_path, case):
    """Counts past the shards once made `info` allocate petabytes (a MemoryError) and `show`
    read rows no shard holds; an edited size a ValueError. Each is now one line, found before
    anything is printed or drawn."""
    edit, says = EDITS[case]
    root = _edited_copy(small, tmp_path / "d", edit)
    for args in (["info", str(root)], ["show", str(root), "-o", str(tmp_path / "s.png")]):
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 1 and not isinstance(res.exception, Exception), res.output
        lines = res.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: ") and says in lines[0], lines
    assert not (tmp_path / "s.png").exists()
    res = CliRunner().invoke(main, ["verify", str(root)])  # lists each problem, then one line
    assert res.exit_code == 1 and not isinstance(res.exception, Exception), res.output
    assert res.output.strip().splitlines()[-1].startswith("Error: ")
    assert "Traceback" not in res.output


def _free_space(monkeypatch, free):
    """shutil.disk_usage as it would read on a disk with `free` bytes left."""
    import shutil
    real = shutil.disk_usage
    monkeypatch.setattr(room.shutil, "disk_usage", lambda path: real(path)._replace(free=free))


def test_a_dataset_the_disk_cannot_hold_is_refused_before_any_work(tmp_path, monkeypatch):
    """`--n 10000000000` once ran 40 s in silence, then showed an ETA of 3,630 hours."""
    import time
    _free_space(monkeypatch, 10 * 10 ** 9)
    out = tmp_path / "huge"
    started = time.time()
    res = CliRunner().invoke(main, ["make", "--n", "10000000000", "--out", str(out), "--quiet"])
    assert time.time() - started < 20
    assert res.exit_code == 1 and not isinstance(res.exception, Exception), res.output
    line, = res.output.strip().splitlines()
    assert "11,100,000,000 samples need about" in line and " TB on disk" in line, line
    assert "10.0 GB free" in line and not out.exists()


def test_the_size_estimate_is_close_and_counts_deflate_and_force(tmp_path, monkeypatch):
    cfg = MakeConfig(n=40, val=0, test=8, size=32, shard_size=16, workers=1,
                     out=str(tmp_path / "d"))
    each = room.stored_sample_bytes(cfg)
    need = each * 48 + room.SHARD_BYTES * 4  # 3 train shards and 1 test shard
    raw = room.raw_sample_bytes(cfg) * 48
    assert raw > 20 * each, "Geo deflates far: the raw size would refuse what fits"
    _free_space(monkeypatch, int(need * 0.9))
    res = CliRunner().invoke(main, ARGS + ["--out", cfg.out, "--workers", "1"])
    assert res.exit_code == 1 and "48 samples need about" in res.output
    assert not (tmp_path / "d").exists(), "refused before any output"
    _free_space(monkeypatch, int(need * 1.1))  # below the raw size, above the deflated one
    res = CliRunner().invoke(main, ARGS + ["--out", cfg.out, "--workers", "1"])
    assert res.exit_code == 0, res.output
    stored = sum(p.stat().st_size for p in (tmp_path / "d").rglob("*.h5"))
    assert 0.8 < need / stored < 1.25, (need, stored)
    # --force deletes the old data first: its bytes count as free
    _free_space(monkeypatch, int(need - stored / 2))
    res = CliRunner().invoke(main, ARGS + ["--out", cfg.out, "--workers", "1", "--force"])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(main, ARGS + ["--out", str(tmp_path / "e"), "--workers", "1"])
    assert res.exit_code == 1 and "free" in res.output
    # --resume counts only what is left to make
    root = tmp_path / "d"
    assert room.left_to_make(cfg, root, resume=True) == (0, 0)
    (root / "train" / shards.shard_name(1)).unlink()
    assert room.left_to_make(cfg, root, resume=True) == (16, 1)
    assert room.left_to_make(cfg, root, resume=False) == (48, 4)


def test_the_sheet_titles_its_columns(small, tmp_path):
    """It had no text: which column is the flow, which the masks, was left to the legend."""
    from geogen.sheet import TITLE_H, column_titles
    assert column_titles(2) == ["frame 0", "frame 1", "flow 0->1", "visible 0", "visible 1",
                                "amodal circle", "amodal square", "amodal triangle"]
    assert column_titles(3)[2:5] == ["frame 2", "flow 0->1", "flow 1->2"]
    out = tmp_path / "s.png"
    res = CliRunner().invoke(main, ["show", str(small), "--index", "0-1", "-o", str(out)])
    assert res.exit_code == 0, res.output
    band = np.asarray(Image.open(out).convert("L"))[:TITLE_H]          # (TITLE_H, width)
    tile, gap = 96, 2
    lefts = [gap + c * (tile + gap) for c in range(8)] + [band.shape[1] - gap - tile]  # + key
    for x in lefts:  # black text above every column, the flow key's too
        assert (band[:, x:x + tile] < 80).sum() > 20, x
    assert (band[:, lefts[-2] + tile + gap:lefts[-1] - gap] > 200).all(), "no text between"


class _StuckPool:
    """A pool whose terminate waits until its workers are killed, or forever."""

    class _Worker:
        def __init__(self, pool):
            self.exitcode, self.pool = None, pool

        def kill(self):
            self.exitcode = -9
            self.pool.killed += 1
            if self.pool.unstick_on_kill:
                self.pool.unstuck.set()

    def __init__(self, unstick_on_kill):
        self.unstick_on_kill, self.killed, self.joined = unstick_on_kill, 0, False
        self.unstuck = threading.Event()
        self._pool = [self._Worker(self), self._Worker(self)]

    def terminate(self):
        self.unstuck.wait()

    def join(self):
        self.joined = True


@pytest.mark.parametrize("unstick_on_kill", [True, False])
def test_a_pool_that_will_not_end_has_its_workers_killed(unstick_on_kill):
    pool = _StuckPool(unstick_on_kill)
    started = time.monotonic()
    make._end_pool(pool, wait_s=0.1)
    assert pool.killed == 2
    assert pool.joined == unstick_on_kill  # joined only once terminate has returned
    assert time.monotonic() - started < 5
    pool.unstuck.set()


def _stuck_with_sigterm_held():
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    time.sleep(60)


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="POSIX signal masks")
def test_real_workers_that_hold_sigterm_are_killed():
    """The state the pool's SIGTERM cannot end: workers that never unblocked it."""
    pool = make.mp.get_context("fork").Pool(2, initializer=_stuck_with_sigterm_held)
    started = time.monotonic()
    make._end_pool(pool, wait_s=0.5)
    assert all(p.exitcode is not None for p in pool._pool)
    assert time.monotonic() - started < 10
