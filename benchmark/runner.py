"""Runs: check everything, make the data a run needs, train (resuming), evaluate, record.

A run is planned first (`plan`: every check, no work, nothing written) and then executed
(`execute`), so a bad method, profile, folder or record target fails before any data is made.

Seeds: the data of a (dataset, profile) is generated once with profiles.DATA_SEED and shared by
every method and seed, so methods are compared on the same pairs; each run's training seed
derives from (seed, method, dataset) so that seed 0 of two methods are independent streams. The
k-means random_state is the run seed too.

Records: a run never replaces a record without `force`. A training run whose record is there
skips that seed (so a multi-seed command picks up after an interruption); an evaluation of a
given checkpoint refuses. A run that scores fewer test pairs than its profile's test split (a
test limit, or a smaller --data folder) is partial: it gets its own file name and the tables
skip it.

Under torchrun (`torchrun ... -m benchmark.cli run METHOD`, one node or several; docs/cluster.md)
every rank plans and trains, the method's loop running DDP over the ranks, and global rank 0
alone evaluates and writes the record.
"""
from __future__ import annotations

import hashlib
import os
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from benchmark import datasets, records, setaside
from benchmark.errors import BenchmarkError
from benchmark.evaluate import evaluate
from benchmark.paper_tables import ablation_rows, ablation_variant
from benchmark.profiles import (DATA_SEED, PROFILES, dataset_folder, default_data_root,
                                eval_data_root, get_profile, test_data_root)
from benchmark.registry import Axes, Method, TrainSpec, check_profile, get_method, untrained


def derive_seed(seed: int, method: str, dataset: str) -> int:
    """A 31-bit run seed from (seed, method, dataset); stable across machines and runs."""
    digest = hashlib.sha256(f"{seed}:{method}:{dataset}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


def run_name(method: str, dataset: str, profile: str, seed: int, variant: Axes) -> str:
    """The training run's folder name under `runs` (resumed when it is there)."""
    tag = variant.tag()
    return "_".join([method, dataset_folder(dataset), profile] + ([tag] if tag else [])
                    + [f"seed{seed}"])


@dataclass(frozen=True)
class RunRequest:
    """One `flowbench run` invocation, resolved from the command line."""

    method: str
    dataset: str = "geo"
    profile: str = "quick"
    seeds: tuple[int, ...] = (0,)
    data: Path | None = None  # a folder the user names: used as it is, never made unless asked
    make_data: bool = False  # make `data` when it is missing
    results: Path = records.LOCAL
    runs: Path = Path("runs") / "flowbench"
    device: str = "auto"
    variant: Axes = Axes()
    checkpoint: Path | None = None
    test_limit: int | None = None
    force: bool = False  # replace records that exist, training from scratch


@dataclass(frozen=True)
class Folder:
    """A data folder a run reads, and how to make it when it is missing."""

    root: Path
    make: object  # geogen.make.MakeConfig
    own: bool  # named by the benchmark (checked strictly) rather than by the user
    may_make: bool

    def ensure(self, progress: bool, echo) -> Path:
        return datasets.ensure(self.make, self.root, may_make=self.may_make, own_folder=self.own,
                               progress=progress, echo=echo)


@dataclass(frozen=True)
class Plan:
    req: RunRequest
    method: Method
    eval_data: Folder  # 2-frame test pairs and the train pairs k-means fits on
    train_data: Folder | None  # None when a checkpoint is evaluated
    partial_pairs: int | None  # the test pairs scored when fewer than the profile's, else None
    targets: tuple[Path, ...]  # one record path per seed
    # The other datasets' training folders the method trains with (Method.trains_with), by
    # dataset; empty when a checkpoint is evaluated.
    extra_data: tuple[tuple[str, Folder], ...] = ()

    def folders(self) -> tuple[Folder, ...]:
        """Every data folder the run reads, each once: test, training, other datasets'."""
        out: list[Folder] = []
        for f in (self.eval_data, self.train_data, *(f for _, f in self.extra_data)):
            if f is not None and f not in out:
                out.append(f)
        return tuple(out)

    def budget_line(self) -> str:
        r = self.req
        if self.method.train is None:
            return (f"flowbench run {r.method}: it trains nothing; evaluating on "
                    f"{self.eval_data.root} ({r.dataset}, {r.profile})")
        if r.checkpoint is not None:
            return (f"flowbench run {r.method} --checkpoint {r.checkpoint}: evaluating on "
                    f"{self.eval_data.root} ({r.dataset}, {r.profile}), no training")
        also = "".join(f"; also trains on {name}'s training pairs ({folder.root})"
                       for name, folder in self.extra_data)
        return (f"flowbench run {r.method} --dataset {r.dataset} --profile {r.profile}: "
                f"{self.method.budgets[r.profile]} per seed{also}")


def plan(req: RunRequest) -> Plan:
    """Check the request against the registry, the profiles, the data and the records that
    exist; BenchmarkError on the first problem. Reads manifests, writes nothing."""
    from geogen.schema import VARIANTS
    method = get_method(req.method)
    if req.dataset not in VARIANTS:
        raise BenchmarkError(f"unknown dataset {req.dataset!r}; choose from {', '.join(VARIANTS)}")
    check_profile(method, req.profile)
    if method.train is None and req.checkpoint is not None:
        raise BenchmarkError(f"{method.name} trains nothing and has no checkpoint: run it "
                             f"without --checkpoint")
    if not req.seeds or len(set(req.seeds)) != len(req.seeds) or min(req.seeds) < 0:
        raise BenchmarkError(f"seeds must be distinct non-negative integers, got {req.seeds}")
    if req.test_limit is not None and req.test_limit < 1:
        raise BenchmarkError(f"--test-limit must be a positive number of test pairs, got "
                             f"{req.test_limit}")
    _check_device(req, _trains(req, method))
    _check_outputs(req, _trains(req, method))
    if req.checkpoint is not None:
        if len(req.seeds) > 1:
            raise BenchmarkError("--checkpoint evaluates one model: give a single seed")
        if not Path(req.checkpoint).is_file():
            raise BenchmarkError(f"checkpoint {req.checkpoint} does not exist")
        _check_trained_on(method, Path(req.checkpoint), req.dataset)
    eval_data, train_data = _folders(req, method)
    extra = _extra_folders(req, method)
    for folder in (eval_data, train_data, *(f for _, f in extra)):
        if folder is not None:
            _check_folder(folder)
    have = _test_pairs(eval_data)
    scored = have if req.test_limit is None else min(req.test_limit, have)
    partial = scored if scored < get_profile(req.profile).test else None
    targets = tuple(records.record_path(req.results, method.name, req.dataset, req.profile, s,
                                        req.variant, partial) for s in req.seeds)
    if req.checkpoint is not None and targets[0].exists() and not req.force:
        raise BenchmarkError(f"record {targets[0]} exists; --force replaces it (or pass "
                             f"another --results folder)")
    return Plan(req, method, eval_data, train_data, partial, targets, extra)


def trained_variant(meta: dict) -> str | None:
    """The variant a checkpoint's main training data held: its meta's own word, else what the
    benchmark's folder name says (`data/<dataset>-<profile>`, as checkpoints made before the
    word was recorded name it); None where neither says."""
    from geogen.schema import VARIANTS
    said = meta.get("data_variant") or []
    if isinstance(said, list) and said and said[0]:
        return str(said[0])
    folder = Path(str(meta.get("data") or "").split("+")[0]).name
    return next((v for v in VARIANTS if folder.startswith(dataset_folder(v) + "-")), None)


def _check_trained_on(method: Method, checkpoint: Path, dataset: str) -> None:
    """A checkpoint scored on the kind of data it was trained on: a model of articulated figures
    scored on Geo would be filed as a Geo record of a Geo model."""
    trained_with = method.load(checkpoint).trained_with or {}
    trained = trained_variant(trained_with.get("meta") or {})
    if trained is not None and trained != dataset:
        raise BenchmarkError(f"{checkpoint} was trained on {trained} data; --dataset {dataset} "
                             f"would file it as a {dataset} record: pass --dataset {trained}")


def _trains(req: RunRequest, method: Method) -> bool:
    """Whether the run trains: not when it scores a given checkpoint, nor for a method that
    trains nothing (`train` None)."""
    return req.checkpoint is None and method.train is not None


def _check_outputs(req: RunRequest, trains: bool) -> None:
    """The record tree and (for a training run) the run folders: writable, before any work."""
    from geogen.outpath import check_output_folder
    check_output_folder(req.results, "--results")
    if trains:
        check_output_folder(req.runs, "--runs")


def _check_device(req: RunRequest, trains: bool) -> None:
    """A device this machine has; a GPU profile's training on a CPU only when asked by name
    (`--device cpu`), before its data (111k pairs) is made."""
    import torch
    if torch.cuda.is_available():
        return
    if req.device == "cuda":
        raise BenchmarkError("--device cuda: this machine has no CUDA device that torch can use; "
                             "pass --device cpu (or auto)")
    profile = get_profile(req.profile)
    if profile.gpu and trains and req.device == "auto":
        cpu = ", ".join(n for n, p in PROFILES.items() if not p.gpu and not p.hidden)
        raise BenchmarkError(f"the {req.profile} profile trains on a GPU and this machine has "
                             f"none: pass --device cpu to train it on the CPU anyway (many times "
                             f"slower), or a CPU profile ({cpu})")


def _extra_folders(req: RunRequest, method: Method) -> tuple[tuple[str, Folder], ...]:
    """The profile folders of the datasets the method also trains with (none for a checkpoint
    or a method that trains nothing)."""
    if not _trains(req, method):
        return ()
    out = []
    for other in method.trains_with.get(req.dataset, ()):
        root = default_data_root(other, req.profile, method.clip_frames)
        out.append((other, Folder(root, datasets.profile_config(other, req.profile, root,
                                                                method.clip_frames), True, True)))
    return tuple(out)


def _test_pairs(folder: Folder) -> int:
    """The test pairs the folder holds (or will hold once made)."""
    if (folder.root / "manifest.json").is_file():
        return int(datasets.read_manifest_checked(folder.root)["counts"]["test"])
    return folder.make.counts()["test"]


def _folders(req: RunRequest, method: Method) -> tuple[Folder, Folder | None]:
    """Where the run reads its test pairs and trains, and what it may make there."""
    if method.train is None:
        return _untrained_folder(req), None
    if req.data is not None:
        root = Path(req.data)
        if req.checkpoint is not None:
            return Folder(root, datasets.eval_config(req.dataset, req.profile, root), False,
                          req.make_data), None
        # The user's folder serves training and testing; it is made (if asked) with the
        # method's clip length, and testing reads frames 0 and 1 of its clips.
        folder = Folder(root, datasets.profile_config(req.dataset, req.profile, root,
                                                      method.clip_frames), False, req.make_data)
        return folder, folder
    own = default_data_root(req.dataset, req.profile)
    full = Folder(own, datasets.profile_config(req.dataset, req.profile, own), True, True)
    if req.checkpoint is not None:
        if (own / "manifest.json").is_file():
            return full, None
        # Scoring a checkpoint reads only the test pairs and the k-means fit pairs: make those.
        ev = eval_data_root(req.dataset, req.profile)
        return Folder(ev, datasets.eval_config(req.dataset, req.profile, ev), True, True), None
    if method.clip_frames == 2:
        return full, full
    clips = default_data_root(req.dataset, req.profile, method.clip_frames)
    return full, Folder(clips, datasets.profile_config(req.dataset, req.profile, clips,
                                                       method.clip_frames), True, True)


def _untrained_folder(req: RunRequest) -> Folder:
    """What a method that trains nothing reads: the test pairs alone. The profile's folder, or
    a checkpoint's evaluation set, serves where it is here; else only the test split is made
    (`profiles.test_data_root`)."""
    if req.data is not None:
        root = Path(req.data)
        return Folder(root, datasets.test_config(req.dataset, req.profile, root), False,
                      req.make_data)
    for root, config in ((default_data_root(req.dataset, req.profile), datasets.profile_config),
                         (eval_data_root(req.dataset, req.profile), datasets.eval_config)):
        if (root / "manifest.json").is_file():
            return Folder(root, config(req.dataset, req.profile, root), True, True)
    root = test_data_root(req.dataset, req.profile)
    return Folder(root, datasets.test_config(req.dataset, req.profile, root), True, True)


def _check_folder(folder: Folder) -> None:
    """The checks of datasets.ensure, made before any work: a folder that is there must fit,
    one that is not must be one the run may make."""
    if (folder.root / "manifest.json").is_file() or not folder.may_make:
        datasets.ensure(folder.make, folder.root, may_make=False, own_folder=folder.own)


def _slots(root: Path) -> tuple[str, ...]:
    """The slot names a data folder's manifest gives (Geo's three when it names none)."""
    from geogen.schema import slots_of
    return slots_of(datasets.read_manifest_checked(root))


def _look_entry(manifest: dict) -> dict:
    """`look` for data with textures (Geo+), so the tables tell its looks apart; nothing for
    the rest, whose records stay as they were."""
    look = datasets.data_look(manifest)
    return {} if look is None else {"look": look}


def _data_info(root: Path, profile: str) -> dict:
    from geogen.shards import manifest_hash
    manifest = datasets.read_manifest_checked(root)
    return {"root": str(root), "manifest_hash": manifest_hash(root),
            "supersample": datasets.data_supersample(manifest),
            "motion": manifest.get("config", {}).get("motion"),  # None: imported data
            **_look_entry(manifest),
            "counts": {k: int(v) for k, v in manifest.get("counts", {}).items()},
            "frames": int(manifest.get("frames", 2)),
            "profile": asdict(get_profile(profile)), "data_seed": DATA_SEED}


def run(req: RunRequest, progress: bool = True, echo=print) -> list[Path]:
    """Plan, then execute: the record paths, one per seed."""
    return execute(plan(req), progress, echo)


def execute(p: Plan, progress: bool = True, echo=print) -> list[Path]:
    """Make the data if needed, then train (or load the checkpoint), evaluate and record."""
    req, method = p.req, p.method
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and (req.force or req.checkpoint is not None):
        raise BenchmarkError("under torchrun a run trains: --force and --checkpoint are for one "
                             "process (remove the run folder to start afresh)")
    if rank != 0:
        echo, progress = _quiet, False  # rank 0 reports
    t0 = time.time()
    eval_root = p.eval_data.ensure(progress, echo)
    train_root = p.train_data.ensure(progress, echo) if p.train_data is not None else None
    extra_roots = {name: folder.ensure(progress, echo) for name, folder in p.extra_data}
    data_s = time.time() - t0
    data_info = _data_info(eval_root, req.profile)
    if train_root is not None and train_root != eval_root:
        data_info["train"] = _data_info(train_root, req.profile)
    if extra_roots:
        data_info["trains_with"] = {name: _data_info(root, req.profile)
                                    for name, root in extra_roots.items()}
    written = []
    for seed, target in zip(req.seeds, p.targets):
        run_dir = req.runs / run_name(method.name, req.dataset, req.profile, seed, req.variant)
        setaside.restore(run_dir, target, seed, echo)  # what a killed --force run set aside
        if target.exists() and not req.force:
            # A training run re-run after an interruption picks up at the first seed without
            # a record (plan refused this for an evaluated checkpoint).
            echo(f"record exists, skipping seed {seed}: {target} (--force redoes it)")
            written.append(target)
            continue
        run_seed = derive_seed(seed, method.name, req.dataset)
        spec = TrainSpec(dataset=req.dataset, profile=req.profile, seed=run_seed,
                         data_root=train_root or eval_root, run_dir=run_dir,
                         image_size=get_profile(req.profile).size, device=req.device,
                         variant=req.variant, extra_data=extra_roots,
                         slots=_slots(train_root or eval_root))
        train_config = method.config(spec)  # fails early on a bad variant or profile
        aside = req.force and _trains(req, method) and (run_dir.exists() or target.exists())
        if aside:
            # Redo means from scratch: the old run folder would be resumed (or refused when its
            # config differs), not retrained. The old model and record wait beside their places
            # until the new pair is complete, and come back if this run stops before.
            echo(f"--force: {run_dir} and its record set aside until seed {seed} is trained "
                 f"afresh and scored")
            setaside.put_aside(run_dir, target)
        try:
            done = _run_seed(p, seed, spec, train_config, eval_root, data_info, data_s,
                             progress, echo, rank)
        except BaseException:
            if aside:
                setaside.restore(run_dir, target, seed, echo)
            raise
        if aside:
            setaside.drop(run_dir, target)
        if done is None:  # the other ranks trained with it; rank 0 scores and records
            continue
        path, metrics, partial = done
        data_s = 0.0  # only the first seed paid for the data
        echo(f"record: {path}" + (f" (partial, {metrics['n_test']} test pairs: the tables skip "
                                  f"it)" if partial else ""))
        for kind in ("amodal", "visible"):
            iou = metrics[f"{kind}_iou"]
            echo(f"{kind} IoU (fixed assignment): all {_fmt(iou['all'])}, "
                 + ", ".join(f"{k} {_fmt(v)}" for k, v in iou.items() if k != "all"))
        written.append(path)
    return written


def resume_line(runs: Path, force: bool, checkpoint: Path | None,
                trains_nothing: bool = False) -> str:
    """What the same command does after a Ctrl-C stopped `execute` (its rules above): the data
    made so far is kept and finished (datasets.ensure resumes it); a training run resumes from
    its checkpoint in its run folder unless --force, which sets that folder aside; evaluation,
    never resumable, starts again (all there is for a method that trains nothing)."""
    if checkpoint is not None or trains_nothing:
        what = "the checkpoint" if checkpoint is not None else "the method"
        return ("no record was written; the same command finishes the data it makes and "
                f"evaluates {what} again")
    if force:
        return ("the old run folders under {runs} and their records are back in place; the "
                "same command with --force trains every seed afresh again; the data made so "
                "far is kept").format(runs=runs)
    return ("the same command resumes: the data made so far is kept, each seed's training "
            f"continues from its checkpoint under {runs}, seeds with a record are skipped")


def _run_seed(p: Plan, seed: int, spec: TrainSpec, train_config, eval_root: Path,
              data_info: dict, data_s: float, progress: bool, echo,
              rank: int = 0) -> tuple[Path, dict, bool] | None:
    """Train (or load the checkpoint), evaluate and write one seed's record: its path, the
    metrics and whether it is partial; None on a rank other than 0 (it only trains)."""
    req, method = p.req, p.method
    started, t_run, git = records.now(), time.time(), records.git_state()
    checkpoint_note = None
    if method.train is None:
        checkpoint, train_config_used = None, train_config
        checkpoint_note = f"{method.name} trains nothing: no checkpoint"
    elif req.checkpoint is None:
        echo(f"training {method.name} on {req.dataset} ({req.profile}), seed {seed} "
             f"-> {spec.run_dir}" + ("" if req.force else " (resumes if interrupted)"))
        checkpoint, train_config_used = method.train(spec), train_config
    else:
        checkpoint, train_config_used = Path(req.checkpoint), None
    train_s = time.time() - t_run
    if rank != 0:
        return None
    loaded = untrained(method, spec) if checkpoint is None else method.load(checkpoint)
    t_eval = time.time()
    metrics = evaluate(method, loaded, eval_root, spec.seed, req.test_limit, progress)
    extras = method.record_extras(loaded, eval_root)
    wall = {"data": data_s, "train": train_s, "eval": time.time() - t_eval,
            "total": time.time() - t_run + data_s}
    rec = records.make_record(
        method=method.name, dataset=req.dataset, profile=req.profile, seed=seed,
        run_seed=spec.seed, axes=loaded.axes, variant=req.variant, metrics=metrics,
        # "train": the config this run trained with (None when it evaluated a given
        # checkpoint); "trained_with": what the evaluated checkpoint says of its training.
        config={"train": train_config_used, "model": loaded.config,
                "trained_with": loaded.trained_with}, data=data_info,
        checkpoint=None if checkpoint is None else str(checkpoint),
        checkpoint_sha256=None if checkpoint is None else records.file_sha256(checkpoint),
        device=req.device, wall=wall, started_at=started, git=git,
        uses_ground_truth=tuple(method.uses_ground_truth), amodal=method.amodal,
        test_limit=req.test_limit, partial=p.partial_pairs is not None, extras=extras)
    if checkpoint_note is not None:
        rec["checkpoint_note"] = checkpoint_note  # why checkpoint_sha256 is null
    return records.write_record(req.results, rec, force=req.force), metrics, rec["partial"]


def _quiet(line: str) -> None:
    pass


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def _axes_spec(dataset: str, profile: str) -> TrainSpec:
    """A spec to ask a method for its default axes (nothing is trained from it)."""
    return TrainSpec(dataset=dataset, profile=profile, seed=0, data_root=Path("unused"),
                     run_dir=Path("unused"), image_size=get_profile(profile).size)


def ablation_grid(method: Method, dataset: str, profile: str) -> list[Axes]:
    """The runs that fill Table 3's rows for a dataset (benchmark.paper_tables): for each row
    the overrides of the method's defaults it needs, the default run first, none twice."""
    defaults = method.axes(_axes_spec(dataset, profile))
    grid = [Axes()]
    for row in ablation_rows(dataset):
        variant = ablation_variant(row, defaults)
        if variant not in grid:
            grid.append(variant)
    return grid


def ablation_requests(base: RunRequest) -> list[RunRequest]:
    """One request per run of the grid, each checked (plan) before the first starts."""
    method = get_method(base.method)
    check_profile(method, base.profile)
    if method.axes(_axes_spec(base.dataset, base.profile)) == Axes():
        raise BenchmarkError(f"{method.name} has no Table 3 axes to ablate")
    return [replace(base, variant=v) for v in ablation_grid(method, base.dataset, base.profile)]


def execute_all(plans: list[Plan], jobs: int, echo=print) -> list[Path]:
    """Execute the plans, `jobs` at a time in processes of their own (one accelerator shared by
    several small runs); jobs 1 runs them here one after the other. With jobs > 1 every folder
    a plan reads is made first, here, so no two processes make one folder (and should one be
    missing still, `datasets.ensure` makes it under a lock)."""
    if jobs <= 1:
        written = []
        for p in plans:
            echo(f"== ablation {p.req.variant.tag() or 'default'}")
            written += execute(p, echo=echo)
        return written
    prepare_data(plans, echo)
    return _run_parallel(plans, jobs, echo)


def prepare_data(plans: list[Plan], echo=print) -> list[Path]:
    """Make (or check) every data folder the plans read, each once, in plan order."""
    seen: list[Folder] = []
    for p in plans:
        seen += [f for f in p.folders() if f not in seen]
    return [f.ensure(False, echo) for f in seen]


def _run_parallel(plans: list[Plan], jobs: int, echo) -> list[Path]:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    # spawn: a CUDA context does not survive fork, and each run starts from a clean interpreter.
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(_execute_logged, p): p for p in plans}
        written = []
        for future in as_completed(futures):
            paths, lines = future.result()
            tag = futures[future].req.variant.tag() or "default"
            for line in lines:
                echo(f"[{tag}] {line}")
            written += paths
    return written


def _execute_logged(p: Plan) -> tuple[list[Path], list[str]]:
    """execute() without progress bars, its messages returned to the parent."""
    from trainloop.allocator import keep_freed_memory
    # Set by the processes that run commands, not by `execute`, so a test's process keeps its
    # own allocator: evaluation batches reuse freed memory; the arithmetic is unchanged.
    keep_freed_memory()
    lines: list[str] = []
    return execute(p, progress=False, echo=lines.append), lines
