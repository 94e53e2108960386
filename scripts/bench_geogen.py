"""Speed benchmark of the Geo generator (a benchmark, not a test): pairs/s end to end (render,
compress, write, val and test included) at 64 and 128 px with 1 and 2 workers, the full
100k-pair 64 px run with its size on disk, and optionally PSD's own generator timed beside it.

`--variant geo+` (and/or `--motion conformal`) times that variant instead, and the full run is
then the `geogen make` command itself (a subprocess, so its wall time includes start-up and
loading the image banks); `--full-n` smaller than 100000 extrapolates linearly to the 111k
pairs of the floor run (the cost is per sample) and says so in the report:

    .venv/bin/python scripts/bench_geogen.py --variant geo+ --sizes 64 \
        --out results/bench/geoplus.json

PSD's generator (github.com/zhenjia-xu/psd, data_generator.py) is not part of this project: pass
its file with --psd-generator and an interpreter that has its imports (numpy, opencv, tqdm) with
--psd-python. It is loaded as a module and its per-sample function `process` is called in one
process (one core), writing its PNGs and flow .npy into a temporary folder as it normally does;
its `utils` helpers are replaced by equivalents (cv2.resize, cv2.imwrite) because the original
ones need long-removed numpy/Python names (np.float, collections.Sequence).

    .venv/bin/python scripts/bench_geogen.py --out results/bench/geogen.json \
        [--psd-generator /tmp/psd/data_generator.py --psd-python /tmp/psdvenv/bin/python]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmark.records import machine_info
from geogen.make import MakeConfig, make_dataset

PSD_HARNESS = r"""
import importlib.util, os, sys, tempfile, time, types
import cv2, numpy as np
gen_path, n = sys.argv[1], int(sys.argv[2])
utils = types.ModuleType("utils")
def mkdir(path, clean=False):
    os.makedirs(path, exist_ok=True)
def imresize(im, size):
    return cv2.resize(im, dsize=(size, size))
def imwrite(path, im):
    cv2.imwrite(path, np.clip(np.asarray(im) * 255, 0, 255).astype(np.uint8)[..., ::-1])
utils.mkdir, utils.imresize, utils.imwrite, utils.flow2im = mkdir, imresize, imwrite, None
sys.modules["utils"] = utils
spec = importlib.util.spec_from_file_location("psd_generator", gen_path)
gen = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gen)
with tempfile.TemporaryDirectory() as d:
    gen.data_path = d
    gen.process(0)  # warm-up
    t0 = time.perf_counter()
    for i in range(1, n + 1):
        gen.process(i)
    dt = time.perf_counter() - t0
    files = len(os.listdir(d))
print({"pairs": n, "seconds": dt, "files": files})
"""


def machine() -> dict:
    return {**machine_info("cpu"), "loadavg_start": os.getloadavg()}


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def time_cli(work: Path, name: str, variant: str, motion: str, n: int, size: int) -> dict:
    """Wall time and bytes of the `geogen make` command (all cores), then delete its output."""
    out = work / name
    geogen = Path(sys.executable).with_name("geogen")
    cmd = [str(geogen), "make", "--variant", variant, "--motion", motion, "--n", str(n),
           "--size", str(size), "--out", str(out), "--quiet"]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True)
    dt = time.perf_counter() - t0
    pairs = sum(MakeConfig(n=n).counts().values())
    row = {"command": " ".join(["geogen"] + cmd[1:-3] + ["--out", "DIR", "--quiet"]),
           "size": size, "workers": "auto", "n_train": n, "pairs_total": pairs,
           "seconds": round(dt, 2), "pairs_per_s": round(pairs / dt, 1),
           "bytes_on_disk": du(out), "bytes_per_pair": round(du(out) / pairs)}
    full = sum(MakeConfig(n=100_000).counts().values())
    if pairs != full:
        row["extrapolated_to_111k_pairs"] = {"pairs_total": full,
                                             "seconds": round(dt * full / pairs, 1),
                                             "bytes_on_disk": round(du(out) * full / pairs)}
    shutil.rmtree(out)
    print(json.dumps(row), flush=True)
    return row


def time_make(work: Path, name: str, **kw) -> dict:
    out = work / name
    cfg = MakeConfig(out=str(out), **kw)
    t0 = time.perf_counter()
    make_dataset(cfg, force=True, progress=False)
    dt = time.perf_counter() - t0
    pairs = sum(cfg.counts().values())
    row = {"variant": cfg.variant, "motion": cfg.motion, "size": cfg.size,
           "workers": cfg.workers, "n_train": cfg.n, "pairs_total": pairs,
           "seconds": round(dt, 2), "pairs_per_s": round(pairs / dt, 1),
           "pairs_per_s_per_worker": round(pairs / dt / cfg.workers, 1),
           "bytes_on_disk": du(out), "bytes_per_pair": round(du(out) / pairs)}
    shutil.rmtree(out)
    print(json.dumps(row), flush=True)
    return row


def time_psd(generator: str, python: str, n: int) -> dict:
    res = subprocess.run([python, "-c", PSD_HARNESS, generator, str(n)], capture_output=True,
                         text=True)
    if res.returncode:
        return {"error": res.stderr.strip().splitlines()[-1] if res.stderr else "failed"}
    out = eval(res.stdout.strip().splitlines()[-1], {})   # the harness prints a dict literal
    row = {"size": 128, "workers": 1, "pairs": out["pairs"], "seconds": round(out["seconds"], 2),
           "pairs_per_s": round(out["pairs"] / out["seconds"], 2), "files_written": out["files"]}
    print(json.dumps({"psd": row}), flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="results/bench/geogen.json")
    ap.add_argument("--variant", default="geo")
    ap.add_argument("--motion", default="translation")
    ap.add_argument("--sizes", default="64,128", help="comma-separated image sides")
    ap.add_argument("--full-n", type=int, default=100_000, help="the floor run (0: skip)")
    ap.add_argument("--n64", type=int, default=5000)
    ap.add_argument("--n128", type=int, default=2000)
    ap.add_argument("--psd-generator", default=None)
    ap.add_argument("--psd-python", default=sys.executable)
    ap.add_argument("--psd-n", type=int, default=200)
    args = ap.parse_args()

    t_start = time.perf_counter()
    report = {"command": " ".join([Path(sys.executable).name] + sys.argv),
              "git_commit": subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True,
                                           text=True).stdout.strip(),
              # geogen/ or scripts/ edited since that commit: the numbers are for the working tree
              "uncommitted_changes": bool(subprocess.run(
                  ["git", "status", "--porcelain", "geogen", "scripts"], capture_output=True,
                  text=True).stdout.strip()),
              "variant": args.variant, "motion": args.motion, "machine": machine(), "runs": []}
    with tempfile.TemporaryDirectory(prefix="bench_geogen_") as tmp:
        work = Path(tmp)
        sizes = [int(v) for v in args.sizes.split(",")]
        for size, n in ((64, args.n64), (128, args.n128)):
            if size not in sizes:
                continue
            for workers in (1, 2):
                report["runs"].append(time_make(work, f"s{size}w{workers}", n=n, size=size,
                                                workers=workers, variant=args.variant,
                                                motion=args.motion))
        if args.psd_generator:
            report["psd"] = time_psd(args.psd_generator, args.psd_python, args.psd_n)
            ours = [r for r in report["runs"] if r["size"] == 128 and r["workers"] == 1][0]
            if "pairs_per_s" in report["psd"]:
                report["speedup_128px_per_core_vs_psd"] = round(
                    ours["pairs_per_s"] / report["psd"]["pairs_per_s"], 1)
        if args.full_n and args.variant == "geo" and args.motion == "translation":
            report["full_run"] = time_make(work, "full", n=args.full_n, size=64, workers=2)
        elif args.full_n:
            report["full_run"] = time_cli(work, "full", args.variant, args.motion, args.full_n, 64)
    report["machine"]["loadavg_end"] = os.getloadavg()
    report["wall_seconds"] = round(time.perf_counter() - t_start, 1)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp_out = out.with_name(out.name + ".tmp")
    tmp_out.write_text(json.dumps(report, indent=2) + "\n")
    os.replace(tmp_out, out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
