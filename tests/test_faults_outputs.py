"""Every output path is checked before any work (issue 52, items 5 and 6): a file where a
folder goes, a folder where a file goes, a path under a file, /proc, a read-only or unwritable
folder (simulated through the OSError the system gives) end in one line and exit 1, with no data
made, nothing trained or evaluated; a full disk while writing is one line and leaves no
temporary file."""
import errno
import re

import pytest
from click.testing import CliRunner

from benchmark.cli import main as flowbench
from geogen import outpath
from geogen.cli import main as geogen
from geogen.errors import GeogenError


def _one_line(res, *parts):
    assert res.exit_code == 1, res.output
    assert len(res.output.strip().splitlines()) == 1 and "Traceback" not in res.output, res.output
    for part in parts:
        assert part in res.output, res.output


@pytest.fixture
def read_only(monkeypatch):
    """Every folder refuses new files, as a read-only mount does."""
    def refuse(path):
        raise OSError(errno.EROFS, "Read-only file system")
    monkeypatch.setattr(outpath, "_create", refuse)


def test_run_checks_results_and_runs_before_any_data(tmp_path, monkeypatch, register_toy):
    monkeypatch.chdir(tmp_path)
    toy = register_toy()
    (tmp_path / "file").write_text("")
    run = ["run", toy.name, "--profile", "smoke"]
    _one_line(CliRunner().invoke(flowbench, run + ["--results", "file"]),
              "--results file is a file, not a folder")
    _one_line(CliRunner().invoke(flowbench, run + ["--results", "file/records"]),
              "--results file/records lies under", "which is a file")
    _one_line(CliRunner().invoke(flowbench, run + ["--runs", "/proc/runs"]),
              "--runs /proc/runs cannot be written")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]  # no data, run or record


def test_run_checks_results_on_a_read_only_mount(tmp_path, monkeypatch, register_toy, read_only):
    monkeypatch.chdir(tmp_path)
    toy = register_toy()
    res = CliRunner().invoke(flowbench, ["run", toy.name, "--profile", "smoke",
                                         "--results", "ro/records"])
    _one_line(res, "--results ro/records cannot be written: Read-only file system")
    assert not any(tmp_path.iterdir())


def test_table_and_show_check_their_output_first(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()
    table = ["table", "--results", str(tmp_path)]  # no records: reached, it would say so
    _one_line(CliRunner().invoke(flowbench, table + ["-o", "out"]), "-o out is a folder")
    _one_line(CliRunner().invoke(flowbench, table + ["-o", "/proc/t.md"]),
              "-o /proc/t.md cannot be written")
    show = ["show", "missing.pt"]  # reached, the source would be refused
    _one_line(CliRunner().invoke(flowbench, show + ["-o", "out"]), "-o out is a folder")
    _one_line(CliRunner().invoke(flowbench, show + ["-o", "/proc/x.png"]),
              "-o /proc/x.png cannot be written")


def test_show_and_table_on_a_read_only_folder(tmp_path, monkeypatch, read_only):
    monkeypatch.chdir(tmp_path)
    _one_line(CliRunner().invoke(flowbench, ["show", "missing.pt", "-o", "x.png"]),
              "-o x.png cannot be written: Read-only file system")
    _one_line(CliRunner().invoke(flowbench, ["table", "--results", ".", "-o", "t.md"]),
              "-o t.md cannot be written: Read-only file system")


def test_a_full_disk_while_writing_a_record_or_table_is_one_line(tmp_path, monkeypatch):
    from benchmark import records
    from benchmark.errors import BenchmarkError
    real_fdopen = records.os.fdopen

    class Full:
        def __init__(self, fd, mode):
            self.fh = real_fdopen(fd, mode)

        def __enter__(self):
            return self

        def write(self, text):
            raise OSError(errno.ENOSPC, "No space left on device")

        def __exit__(self, *exc):
            self.fh.close()
    monkeypatch.setattr(records.os, "fdopen", Full)
    with pytest.raises(BenchmarkError, match=r"cannot write .*t\.md: No space left on device"):
        records.write_text_atomic(tmp_path / "t.md", "text")
    assert not any(tmp_path.iterdir())  # no temporary file left


def test_geogen_show_checks_its_output_before_reading(tiny_geo, tmp_path, read_only):
    (tmp_path / "sheet.png").mkdir()
    res = CliRunner().invoke(geogen, ["show", str(tiny_geo), "-o", str(tmp_path / "sheet.png")])
    _one_line(res, "is a folder")
    res = CliRunner().invoke(geogen, ["show", str(tiny_geo), "-o", str(tmp_path / "s.png")])
    _one_line(res, "cannot be written: Read-only file system")


def test_geogen_show_under_proc(tiny_geo):
    res = CliRunner().invoke(geogen, ["show", str(tiny_geo), "-o", "/proc/sheet.png"])
    _one_line(res, "-o /proc/sheet.png cannot be written")


def _bad_paths(tmp_path):
    """(path, words of the one line) for paths that no writer can use: empty (an unset shell
    variable, which Path('') would read as the working folder), a loop of symbolic links (the
    path itself or under it), a name longer than the file system allows."""
    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    return [("", "is empty (an unset shell variable?)"),
            (str(tmp_path / "loop1"), "symbolic links form a loop"),
            (str(tmp_path / "loop1" / "sub"), "symbolic links form a loop"),
            (str(tmp_path / ("x" * 300)), "is 300 bytes, more than the 255"),
            (str(tmp_path / ("y" * 256) / "d"), "is 256 bytes, more than the 255")]


def test_an_empty_looping_or_over_long_path_is_refused_by_the_checks(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for path, words in _bad_paths(tmp_path):
        for check in (outpath.check_output_folder, outpath.check_output_file):
            with pytest.raises(GeogenError, match=re.escape(words)):
                check(path, "--out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loop1", "loop2"]


def test_every_command_refuses_such_a_path_before_any_work(tmp_path, monkeypatch, register_toy):
    monkeypatch.chdir(tmp_path)
    toy = register_toy()
    make = ["make", "--n", "20", "--size", "32", "--workers", "1", "--quiet", "--out"]
    for path, words in _bad_paths(tmp_path):
        if not path:  # every path option refuses it first (test_faults_empty_paths.py)
            continue
        _one_line(CliRunner().invoke(geogen, make + [path]), words)
        _one_line(CliRunner().invoke(geogen, ["merge", path]), words)
        _one_line(CliRunner().invoke(geogen, ["import-psd", str(tmp_path), "--out", path]), words)
        _one_line(CliRunner().invoke(flowbench, ["run", toy.name, "--profile", "smoke",
                                                 "--results", path]), words)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loop1", "loop2"]  # no data/geo


def test_make_force_onto_a_read_only_mount_deletes_nothing(tmp_path, monkeypatch):
    out = tmp_path / "d"
    make = ["make", "--n", "20", "--size", "32", "--workers", "1", "--quiet", "--out", str(out)]
    assert CliRunner().invoke(geogen, make).exit_code == 0
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}

    def refuse(path):
        raise OSError(errno.EROFS, "Read-only file system")
    monkeypatch.setattr(outpath, "_create", refuse)
    res = CliRunner().invoke(geogen, make + ["--force", "--seed", "1"])
    _one_line(res, f"--out {out} cannot be written: Read-only file system")
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    monkeypatch.undo()
    # Should a delete fail all the same (the mount turned read-only since the check), one line.
    from geogen import make as make_module

    def rmtree(path):
        raise OSError(errno.EROFS, "Read-only file system")
    monkeypatch.setattr(make_module.shutil, "rmtree", rmtree)
    res = CliRunner().invoke(geogen, make + ["--force", "--seed", "1"])
    _one_line(res, f"{out}: cannot replace the dataset there (Read-only file system)")
