"""An interrupted torch.compile leaves a short kernel library in the shared cache: the next
training drops it (unless a process is building it now) instead of failing to load it."""
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import torch
from filelock import FileLock

from flowcaps import kernel_cache

WHOLE = Path(torch._C.__file__)  # a real shared library, to copy and cut


def _cache_with(tmp_path, files):
    cache = tmp_path / "cache"
    for name, data in files.items():
        path = cache / name[1:3] / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return cache


def test_a_whole_library_is_kept_and_cut_ones_are_dropped(tmp_path):
    whole = WHOLE.read_bytes()
    cache = _cache_with(tmp_path, {
        "cwhole.main.so": whole,
        "cempty.main.so": b"",
        "chalf.main.so": whole[: len(whole) // 2],
        "cheader.o": whole[:40],
        "cnotelf.so": b"x" * 4096,
    })
    assert not kernel_cache.is_truncated(cache / "wh" / "cwhole.main.so")
    dropped = kernel_cache.drop_truncated(cache)
    assert sorted(p.name for p in dropped) == ["cempty.main.so", "chalf.main.so", "cheader.o",
                                               "cnotelf.so"]
    assert sorted(p.name for p in cache.glob("*/*.*o")) == ["cwhole.main.so"]


def test_a_library_being_built_is_left_alone(tmp_path):
    cache = _cache_with(tmp_path, {"cbusy.main.so": b""})
    (cache / "locks").mkdir()
    with FileLock(str(cache / "locks" / "cbusy.lock")):  # as inductor holds it while building
        assert kernel_cache.drop_truncated(cache) == []
    assert (cache / "bu" / "cbusy.main.so").exists()
    assert [p.name for p in kernel_cache.drop_truncated(cache)] == ["cbusy.main.so"]


def test_a_missing_cache_is_nothing_to_mend(tmp_path):
    assert kernel_cache.drop_truncated(tmp_path / "absent") == []


COMPILE = textwrap.dedent("""
    import sys, torch
    from flowcaps import kernel_cache
    step = lambda x: (x.sin() * 2 + 1).sum()
    f = kernel_cache.compiled(step) if sys.argv[1] == "mend" else torch.compile(step)
    print(float(f(torch.ones(8))))
""")


def test_a_compile_after_an_interrupted_one_works_once_mended(tmp_path):
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"),
           "OMP_NUM_THREADS": "1"}

    def run(mode):
        return subprocess.run([sys.executable, "-c", COMPILE, mode], env=env, cwd=os.getcwd(),
                              capture_output=True, text=True)

    assert run("plain").returncode == 0
    libraries = list((tmp_path / "inductor").glob("*/*.main.so"))
    assert libraries
    for lib in libraries:  # what a compiler killed while writing leaves
        lib.write_bytes(b"")
    broken = run("plain")
    assert broken.returncode != 0 and "file too short" in broken.stderr
    mended = run("mend")
    assert mended.returncode == 0, mended.stderr[-2000:]
    assert abs(float(mended.stdout) - 8 * (2 * math.sin(1) + 1)) < 1e-5  # vector sin: ulps
    assert not any(kernel_cache.is_truncated(p) for p in (tmp_path / "inductor").glob("*/*.so"))


def test_a_set_kernel_capability_gets_a_cache_folder_of_its_own(tmp_path, monkeypatch):
    """Kernels built under one ATEN_CPU_CAPABILITY crash under another (inductor's cache keys
    leave it out), so a run that sets it compiles into a folder of its own."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir
    base = Path(default_cache_dir()).absolute()
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    assert kernel_cache.split_by_capability() is None
    assert "TORCHINDUCTOR_CACHE_DIR" not in os.environ
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "AVX2")
    assert kernel_cache.split_by_capability() == base / "aten-avx2"
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(base / "aten-avx2")
    assert kernel_cache.split_by_capability() is None  # already there: unchanged
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(base))  # what torch writes when unset
    assert kernel_cache.split_by_capability() == base / "aten-avx2"
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))  # the user's own: kept
    assert kernel_cache.split_by_capability() is None
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path)
