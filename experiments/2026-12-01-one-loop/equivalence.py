"""Behaviour fingerprint of a project checkout, for the one-training-loop refactor.

Run from a checkout (TREE) with its own virtual environment:

    cd TREE && TREE/.venv/bin/python /path/to/equivalence.py --out DIR

and compare two fingerprints with compare.py BEFORE_DIR AFTER_DIR. Only the public command
lines (geogen, flowcaps, flowbench from TREE/.venv/bin) are used, so the trainers' modules may
move freely. Everything is written under DIR (data, run folders, records, raw command output);
the tree itself is left as it was (checked with `git status --ignored` before and after).

What it records (DIR/summary.json, one entry per item):
  smoke/<method>  `flowbench run METHOD --profile smoke --dataset geo --seeds 0` for every
                  registered method that trains (flowcaps-refine shares flowcaps' training);
                  every log.csv of its run folder goes to DIR/logs/smoke-<method>[-<sub>].csv,
                  and the record's metrics (60 smoke test pairs) are kept.
  ddp/<n>rank     `flowcaps train` on 32 px smoke data with a tiny model and a step budget,
                  with cpu_ranks 2 (torchrun, gloo) and 1; logs to DIR/logs/ddp-<n>rank.csv.
  init/1rank      the same one-rank run started from ddp/1rank's model (--init, a fine-tune).
  mix/1rank       the same on 32 px Geo+ with Geo's pairs mixed in (mix_data, mix_first, and
                  GroupNorm in the encoder), as the benchmark's Geo+ FlowCapsules runs train.
  score/<ckpt>    every TREE/checkpoints/*.pt evaluated by its method on 200 test pairs of a
                  Geo or Geo+ set made at a fixed seed (`flowbench run M --checkpoint X`); plus
                  score/<ckpt>@flowcaps-refine for checkpoints/flowcaps_geo_quick.pt on the first
                  --refine-pairs pairs (refinement costs about 2 CPU seconds a pair here).
Every metric is rounded to 3 decimals. Every subprocess runs with one intra-op thread
(OMP_NUM_THREADS=1 and, where the CLI takes it, threads=1), so numbers do not depend on how
busy the machine is or on its core count.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path

SMOKE_DATASET = "geo"
SMOKE_SEED = 0
# Methods that train nothing of their own: their smoke run would repeat another's training.
SHARES_TRAINING = {"flowcaps-refine": "flowcaps"}
SCORE_SEED = 777  # geogen seed of the scoring sets (not the benchmark's DATA_SEED: fresh pairs)
SCORE_TEST = 200  # test pairs scored per checkpoint
SCORE_TRAIN = 200  # train pairs the k-means protocol fits on (>= 100 so kmeans_100 is scored)
REFINE_CHECKPOINTS = ("flowcaps_geo_quick.pt",)
FILE_DATASET = {"geo": "geo", "geoplus": "geo+"}  # the dataset token of a checkpoint's file name

# The DDP smoke: the benchmark's flowcaps smoke model (SMOKE_MODEL / SMOKE_TRAIN of
# benchmark/methods/flowcaps.py) on the quick profile, through `flowcaps train --set`.
DDP_PAIRS = 288  # 18 steps of 16 pairs with one rank; 144 pairs and 18 steps of 8 per rank with 2
DDP_SETS = [
    "compile=false", "epochs=1", "batch_size=16", "max_minutes=null", "warmup_steps=0",
    "points=128", "smooth_points=16", "blur_sigmas=[0.0]", "both_directions=false",
    "threads=1", "log_every=3", "checkpoint_minutes=10.0",
    "model.image_size=32", "model.enc_channels=[16,16,32,32]", "model.enc_hidden=64",
    "model.dec_hidden=32",
]

TIMEOUT = 1800  # seconds per command; a hung command is reported, not waited on forever


class Harness:
    def __init__(self, tree: Path, out: Path, jobs: int, refine_pairs: int):
        self.tree, self.out, self.jobs, self.refine_pairs = tree, out, jobs, refine_pairs
        self.bin = tree / ".venv" / "bin"
        self.raw = out / "raw"
        self.logs = out / "logs"
        self.t0 = time.monotonic()
        self.lock = threading.Lock()
        self.items: dict[str, dict] = {}
        self.env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                    "PYTHONHASHSEED": "0"}

    # -- plumbing ---------------------------------------------------------------------------

    def say(self, text: str) -> None:
        with self.lock:
            print(f"[{time.monotonic() - self.t0:7.1f}s] {text}", flush=True)

    def sh(self, name: str, args: list[str]) -> tuple[int, float, str]:
        """Run a command in the tree; its output goes to raw/<name>.txt. (rc, seconds, tail)."""
        path = self.raw / f"{name.replace('/', '__')}.txt"
        t = time.monotonic()
        with open(path, "w") as fh:
            fh.write("$ " + " ".join(args) + "\n")
            fh.flush()
            try:
                rc = subprocess.run(args, cwd=self.tree, env=self.env, stdout=fh,
                                    stderr=subprocess.STDOUT, timeout=TIMEOUT).returncode
            except subprocess.TimeoutExpired:
                rc = 124
        text = path.read_text(errors="replace").replace("\r", "\n")
        tail = [ln for ln in text.splitlines() if ln.strip() and "it/s]" not in ln
                and "batch/s]" not in ln and "step/s]" not in ln]
        return rc, time.monotonic() - t, (tail[-1] if tail else "")

    def record(self, key: str, entry: dict) -> None:
        with self.lock:
            self.items[key] = entry

    def tool(self, name: str) -> str:
        return str(self.bin / name)

    # -- discovery ----------------------------------------------------------------------------

    def methods(self) -> list[str]:
        """The registered method names, from `flowbench list`."""
        out = subprocess.run([self.tool("flowbench"), "list"], cwd=self.tree, env=self.env,
                             capture_output=True, text=True, check=True).stdout
        names, inside = [], False
        for line in out.splitlines():
            if line.strip() == "methods:":
                inside = True
                continue
            if inside and not line.startswith("  "):
                break
            m = re.match(r"^  (\S+)\s", line)
            if inside and m:
                names.append(m.group(1))
        return names

    def checkpoint_target(self, ckpt: Path, methods: list[str]) -> dict:
        """What a committed checkpoint is: its method, dataset and image size, read from its
        provenance JSON and the records it names, else from its file name (and `flowcaps
        info` for the size). 'reason' is set where it cannot be told."""
        prov_path = ckpt.with_suffix(".json")
        prov = _read_json(prov_path) if prov_path.is_file() else None
        records = []
        for r in (prov or {}).get("records") or []:
            p = r.get("path") if isinstance(r, dict) else r
            rec = _read_json(self.tree / p) if p and (self.tree / p).is_file() else None
            if rec and rec.get("method") in methods:
                records.append(rec)
        tokens = ckpt.stem.split("_")
        by_name = tokens[0] if tokens[0] in methods else None
        cands = [r["method"] for r in records]
        if by_name in cands:
            method = by_name
        elif cands:
            method = next((m for m in cands if m not in SHARES_TRAINING), cands[0])
        else:
            method = by_name
        dataset = next((r["dataset"] for r in records if r["method"] == method), None)
        if dataset is None and len(tokens) > 1:
            dataset = FILE_DATASET.get(tokens[1])
        size = None
        for source in [r for r in records if r["method"] == method] + [prov or {}]:
            size = _find_key(source.get("config"), "image_size")
            if size is not None:
                break
        how = "provenance records" if records else "file name"
        if method is None or dataset is None:
            return {"reason": f"neither its provenance ({prov_path.name}) nor its file name "
                              f"names a registered method and a dataset"}
        if size is None and method in ("flowcaps", *SHARES_TRAINING):
            info = subprocess.run([self.tool("flowcaps"), "info", str(ckpt)], cwd=self.tree,
                                  env=self.env, capture_output=True, text=True)
            if info.returncode == 0:
                size = _find_key(json.loads(info.stdout).get("config"), "image_size")
                how += " + flowcaps info"
        return {"method": method, "dataset": dataset, "size": int(size or 64),
                "identified_by": how + ("" if size else "; size assumed 64")}

    # -- items --------------------------------------------------------------------------------

    def smoke(self, method: str) -> None:
        key = f"smoke/{method}"
        self.say(f"start {key}")
        runs, results = self.out / "runs" / method, self.out / "results" / method
        data = self.out / "data" / f"smoke-{method}"  # made by flowbench with the method's clips
        args = [self.tool("flowbench"), "run", method, "--profile", "smoke", "--dataset",
                SMOKE_DATASET, "--seeds", str(SMOKE_SEED), "--data", str(data), "--make-data",
                "--results", str(results), "--runs", str(runs), "--device", "cpu"]
        rc, secs, tail = self.sh(key, args)
        entry = {"kind": "smoke", "method": method, "rc": rc, "wall_s": round(secs, 1),
                 "command": _rel(args, self.tree)}
        entry["logs"] = self._collect_logs(runs, f"smoke-{method}")
        recs = sorted(results.rglob("*.json"))
        if rc == 0 and recs:
            entry.update(status="ok", metrics=flat_metrics(_read_json(recs[0])["metrics"]),
                         record=str(recs[0].relative_to(self.out)))
        else:
            entry.update(status="failed", reason=f"exit {rc}: {tail}")
        if rc == 0 and not entry["logs"]:
            entry["note"] = f"no log.csv under {runs.relative_to(self.out)}"
        self.record(key, entry)
        self.say(f"done  {key}: {entry['status']} ({secs:.0f} s, {len(entry['logs'])} logs)")

    def _collect_logs(self, runs: Path, stem: str) -> list[str]:
        """Copy every log.csv under `runs` (one run folder, maybe with stage subfolders) to
        logs/<stem>[-<subfolder>].csv."""
        out = []
        for log in sorted(runs.rglob("log.csv")):
            parts = log.parent.relative_to(runs).parts[1:]  # below the run folder
            name = "-".join((stem, *parts)) + ".csv"
            shutil.copyfile(log, self.logs / name)
            out.append(name)
        return out

    def make_data(self, name: str, variant: str, n: int, val: int, test: int, size: int,
                  seed: int) -> tuple[Path | None, str]:
        root = self.out / "data" / name
        args = [self.tool("geogen"), "make", "--variant", variant, "--n", str(n), "--val",
                str(val), "--test", str(test), "--size", str(size), "--seed", str(seed),
                "--workers", "1", "--out", str(root), "--quiet"]
        rc, secs, tail = self.sh(f"data/{name}", args)
        self.say(f"data  {name}: {'ok' if rc == 0 else 'FAILED'} ({secs:.0f} s)")
        return (root, "") if rc == 0 else (None, f"geogen make failed (exit {rc}): {tail}")

    def flowcaps_train(self, key: str, data: Path | None, why: str, ranks: int = 1,
                       extra: tuple[str, ...] = (), after: tuple = ()) -> None:
        """`flowcaps train` with the tiny smoke settings (DDP_SETS) and `extra` arguments; then
        the items in `after` (ones that need this run's model), each (key, data, why, ranks,
        extra)."""
        if data is None:
            for k in (key, *(a[0] for a in after)):
                self.record(k, {"kind": "flowcaps-cli", "status": "failed", "reason": why,
                                "logs": []})
            return
        self.say(f"start {key}")
        run = self.out / "cli" / key.replace("/", "-")
        args = [self.tool("flowcaps"), "train", str(data), "--profile", "quick", "--out",
                str(run), "--seed", "0", "--device", "cpu", "--max-pairs", str(DDP_PAIRS),
                "--quiet", "--set", f"cpu_ranks={ranks}"]
        for s in DDP_SETS:
            args += ["--set", s]
        args += [a.format(out=self.out) for a in extra]
        rc, secs, tail = self.sh(key, args)
        entry = {"kind": "flowcaps-cli", "ranks": ranks, "rc": rc, "wall_s": round(secs, 1),
                 "command": _rel(args, self.tree).replace(str(self.out), "OUT"), "logs": []}
        if (run / "log.csv").is_file():
            name = key.replace("/", "-") + ".csv"
            shutil.copyfile(run / "log.csv", self.logs / name)
            entry["logs"] = [name]
        ok = rc == 0 and (run / "model.pt").is_file() and entry["logs"]
        entry.update(status="ok" if ok else "failed")
        if not ok:
            entry["reason"] = f"exit {rc}: {tail}"
        self.record(key, entry)
        self.say(f"done  {key}: {entry['status']} ({secs:.0f} s)")
        for a_key, a_data, a_why, a_ranks, a_extra in after:
            if ok:
                self.flowcaps_train(a_key, a_data, a_why, a_ranks, a_extra)
            else:
                self.record(a_key, {"kind": "flowcaps-cli", "status": "failed", "logs": [],
                                    "reason": f"needs {key}, which failed"})

    def score(self, key: str, ckpt: Path, method: str, dataset: str, data: Path,
              limit: int | None, target: dict) -> None:
        self.say(f"start {key}")
        results = self.out / "scores" / key.split("/", 1)[1].replace("@", "__")
        args = [self.tool("flowbench"), "run", method, "--checkpoint",
                str(ckpt.relative_to(self.tree)), "--data", str(data), "--dataset", dataset,
                "--profile", "quick", "--seeds", "0", "--results", str(results), "--device",
                "cpu"] + (["--test-limit", str(limit)] if limit else [])
        rc, secs, tail = self.sh(key, args)
        entry = {"kind": "score", "checkpoint": str(ckpt.relative_to(self.tree)),
                 "method": method, "dataset": dataset, "test_pairs": limit or SCORE_TEST,
                 "identified_by": target.get("identified_by"), "rc": rc,
                 "wall_s": round(secs, 1), "command": _rel(args, self.tree)}
        recs = sorted(results.rglob("*.json"))
        if rc == 0 and recs:
            entry.update(status="ok", metrics=flat_metrics(_read_json(recs[0])["metrics"]),
                         record=str(recs[0].relative_to(self.out)))
        else:
            entry.update(status="failed", reason=f"exit {rc}: {tail}")
        self.record(key, entry)
        self.say(f"done  {key}: {entry['status']} ({secs:.0f} s)")

    # -- the whole run ------------------------------------------------------------------------

    def run(self, parts: set[str]) -> dict:
        for d in (self.raw, self.logs, self.out / "data"):
            d.mkdir(parents=True, exist_ok=True)
        before = _tree_state(self.tree)
        methods = self.methods()
        self.say(f"methods: {', '.join(methods)}")
        tasks: list = []  # (cost guess, function, args), longest first
        not_covered = []

        data_jobs = []
        if "cli" in parts:
            data_jobs.append(("ddp-geo32", "geo", 300, 20, 60, 32, 0))
            data_jobs.append(("ddp-geoplus32", "geo+", 300, 20, 60, 32, 0))
        targets = {}
        if "scores" in parts:
            for ckpt in sorted((self.tree / "checkpoints").glob("*.pt")):
                targets[ckpt] = self.checkpoint_target(ckpt, methods)
            sizes = sorted({(t["dataset"], t["size"]) for t in targets.values() if "method" in t})
            for dataset, size in sizes:
                data_jobs.append((_score_data_name(dataset, size), dataset, SCORE_TRAIN, 0,
                                  SCORE_TEST, size, SCORE_SEED))
        with ThreadPoolExecutor(self.jobs) as pool:
            made = dict(zip([j[0] for j in data_jobs],
                            pool.map(lambda j: self.make_data(*j), data_jobs)))

        if "smoke" in parts:
            for m in methods:
                if m in SHARES_TRAINING:
                    not_covered.append({"item": f"smoke/{m}", "reason": f"shares "
                                        f"{SHARES_TRAINING[m]}'s training (its smoke run "
                                        f"would train the same model)"})
                    continue
                cost = 3 if m == "flowscae" else 2  # flowscae trains a flowcaps model first
                tasks.append((cost, self.smoke, (m,)))
        if "cli" in parts:
            root, why = made["ddp-geo32"]
            tasks.append((3, self.flowcaps_train, ("ddp/2rank", root, why, 2)))
            # one rank; then a fine-tune from its model (--init), the loop's other start
            init = ("--init", "{out}/cli/ddp-1rank/model.pt", "--set", "center_warmup=0",
                    "--set", "prior_anneal=0")
            tasks.append((3, self.flowcaps_train, ("ddp/1rank", root, why, 1, (),
                                                   (("init/1rank", root, why, 1, init),))))
            # Geo+ with Geo's pairs mixed in (mix_data; Geo alone for the first mix_first), as
            # the benchmark's Geo+ runs train
            proot, pwhy = made["ddp-geoplus32"]
            mix = ("--set", "mix_data={out}/data/ddp-geo32", "--set", "mix_first=0.35",
                   "--set", "model.enc_norm=8")
            tasks.append((3, self.flowcaps_train, ("mix/1rank", proot, pwhy or why, 1, mix)))
        if "scores" in parts:
            for ckpt, t in targets.items():
                key = f"score/{ckpt.stem}"
                if "method" not in t:
                    self.record(key, {"kind": "score", "status": "not covered",
                                      "checkpoint": str(ckpt.relative_to(self.tree)),
                                      "reason": t["reason"]})
                    continue
                root, why = made[_score_data_name(t["dataset"], t["size"])]
                if root is None:
                    self.record(key, {"kind": "score", "status": "failed", "reason": why})
                    continue
                tasks.append((1, self.score, (key, ckpt, t["method"], t["dataset"], root, None,
                                              t)))
                if ckpt.name in REFINE_CHECKPOINTS and "flowcaps-refine" in methods \
                        and self.refine_pairs > 0:
                    tasks.append((4, self.score, (f"{key}@flowcaps-refine", ckpt,
                                                  "flowcaps-refine", t["dataset"], root,
                                                  self.refine_pairs, t)))
        tasks.sort(key=lambda t: -t[0])
        with ThreadPoolExecutor(self.jobs) as pool:
            for f in [pool.submit(fn, *a) for _, fn, a in tasks]:
                f.result()

        after = _tree_state(self.tree)
        summary = {
            "tree": str(self.tree), "git": _git(self.tree), "parts": sorted(parts),
            "machine": _machine(), "wall_s": round(time.monotonic() - self.t0, 1),
            "settings": {"smoke": {"dataset": SMOKE_DATASET, "seed": SMOKE_SEED},
                         "cli": {"pairs": DDP_PAIRS, "sets": DDP_SETS},
                         "scores": {"seed": SCORE_SEED, "test": SCORE_TEST,
                                    "train": SCORE_TRAIN, "refine_pairs": self.refine_pairs}},
            "items": dict(sorted(self.items.items())), "not_covered": not_covered,
            "tree_changed": sorted(set(after) ^ set(before)),
        }
        tmp = self.out / "summary.json.tmp"
        tmp.write_text(json.dumps(summary, indent=2, sort_keys=False) + "\n")
        tmp.replace(self.out / "summary.json")
        return summary


def flat_metrics(metrics: dict, prefix: str = "") -> dict:
    """A record's metrics as flat 'a.b' keys, numbers rounded to 3 decimals."""
    out = {}
    for k, v in metrics.items():
        name = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flat_metrics(v, name + "."))
        elif isinstance(v, float):
            out[name] = round(v, 3)
        else:
            out[name] = v
    return out


def _score_data_name(dataset: str, size: int) -> str:
    return f"{dataset.replace('+', 'plus')}{SCORE_TEST}-{size}px"


def _find_key(obj, key: str):
    """The first value of `key` anywhere in a nested dict/list, else None."""
    if isinstance(obj, dict):
        if key in obj and isinstance(obj[key], int):
            return obj[key]
        for v in obj.values():
            found = _find_key(v, key)
            if found is not None:
                return found
    elif isinstance(obj, list):
        for v in obj:
            found = _find_key(v, key)
            if found is not None:
                return found
    return None


def _read_json(path: Path):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def _rel(args: list[str], tree: Path) -> str:
    """A command line with the tree's path shortened (so two trees' summaries read alike)."""
    return " ".join(args).replace(str(tree) + "/", "")


def _git(tree: Path) -> dict:
    def run(*a):
        r = subprocess.run(["git", *a], cwd=tree, capture_output=True, text=True)
        return r.stdout.strip() if r.returncode == 0 else None
    return {"commit": run("rev-parse", "HEAD"),
            "dirty": bool(run("status", "--porcelain", "--untracked-files=no"))}


def _tree_state(tree: Path) -> list[str]:
    r = subprocess.run(["git", "status", "--porcelain", "--ignored"], cwd=tree,
                       capture_output=True, text=True)
    return r.stdout.splitlines()


def _machine() -> dict:
    cpu = None
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        torch = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch = None
    return {"cpu": cpu, "cpu_count": os.cpu_count(), "python": platform.python_version(),
            "torch": torch}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path, help="new or empty folder for it all")
    ap.add_argument("--tree", type=Path, default=Path.cwd(),
                    help="the project checkout (default: the current folder)")
    ap.add_argument("--jobs", type=int, default=2, help="commands at a time (default 2)")
    ap.add_argument("--only", default="smoke,cli,scores",
                    help="comma-separated parts: smoke, cli (the flowcaps train runs), scores "
                         "(default all)")
    ap.add_argument("--refine-pairs", type=int, default=25,
                    help="test pairs for the flowcaps-refine score (0: skip it; default 25)")
    a = ap.parse_args(argv)
    tree, out = a.tree.resolve(), a.out.resolve()
    parts = {p.strip() for p in a.only.split(",") if p.strip()}
    if not parts <= {"smoke", "cli", "scores"} or not parts:
        print(f"error: --only takes smoke, cli, scores; got {a.only!r}", file=sys.stderr)
        return 2
    for tool in ("geogen", "flowcaps", "flowbench"):
        if not (tree / ".venv" / "bin" / tool).is_file():
            print(f"error: {tree}/.venv/bin/{tool} is missing; run `make setup` in the tree",
                  file=sys.stderr)
            return 2
    if out.exists() and any(out.iterdir()):
        print(f"error: {out} is not empty (runs there would resume, not retrain); pass a new "
              f"folder", file=sys.stderr)
        return 2
    try:
        out.relative_to(tree)
        print(f"error: --out {out} is inside the tree; put it outside", file=sys.stderr)
        return 2
    except ValueError:
        pass
    out.mkdir(parents=True, exist_ok=True)
    s = Harness(tree, out, max(1, a.jobs), a.refine_pairs).run(parts)
    bad = {k: v for k, v in s["items"].items() if v["status"] != "ok"}
    print(f"{len(s['items'])} items, {len(bad)} not ok, {s['wall_s']:.0f} s; "
          f"summary {out / 'summary.json'}")
    for k, v in bad.items():
        print(f"  {k}: {v['status']}: {v.get('reason')}")
    if s["tree_changed"]:
        print(f"warning: the tree changed: {s['tree_changed']}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
