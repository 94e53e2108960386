"""Runs: make the data if missing, train (resuming), evaluate on test, write a record.

Letters: B batch, T frames, K capsules, S slots, H = W image side, F feature size.

Seeds: the data of a (dataset, profile) is generated once with DATA_SEED and shared
by every method and seed, so methods are compared on the same pairs; each run's
training seed derives from (seed, method, dataset) so that seed 0 of two methods
are independent streams. The k-means random_state is the run seed too.
"""
from __future__ import annotations

import hashlib
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from benchmark import records
from benchmark.clustering import classification_metrics
from benchmark.errors import BenchmarkError
from benchmark.metrics import AriScore, FlowScore, SegmentationScore
from benchmark.registry import PROFILES, Axes, LoadedModel, Method, TrainSpec, get_method
from geogen.schema import VARIANTS

DATA_SEED = 0
EVAL_BATCH = 50
TRAIN_FEATURES = 10000  # train pairs embedded to fit k-means (all of them when fewer)
TEST_FIELDS = ("frames", "amodal", "visible", "flow", "present", "label")


@dataclass(frozen=True)
class DataProfile:
    """Split sizes and image side of the dataset a profile trains and tests on."""

    n: int
    val: int
    test: int
    size: int


DATA_PROFILES: dict[str, DataProfile] = {
    "smoke": DataProfile(n=300, val=20, test=60, size=32),
    # CPU: the paper's 10k test pairs; 40k train pairs, about one pass in the 23-minute budget
    # (the flowcaps quick run in checkpoints/ was trained on exactly this set).
    "quick": DataProfile(n=40000, val=400, test=10000, size=64),
    # One GPU, a few minutes of training: the paper's 100k training pairs.
    "gpu": DataProfile(n=100000, val=1000, test=10000, size=64),
    # CPU, a longer run (about 30 passes over them in its 135 minutes): the gpu profile's data,
    # so it shares that folder (see default_data_root).
    "long": DataProfile(n=100000, val=1000, test=10000, size=64),
    # The paper's scale: 100k training pairs.
    "paper": DataProfile(n=100000, val=10000, test=10000, size=64),
}


def derive_seed(seed: int, method: str, dataset: str) -> int:
    """A 31-bit run seed from (seed, method, dataset); stable across machines and runs."""
    digest = hashlib.sha256(f"{seed}:{method}:{dataset}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


def default_data_root(dataset: str, profile: str) -> Path:
    """data/<dataset>-<name>, the name that of the first profile with the same data, so
    profiles that train on the same pairs share one folder instead of making it twice."""
    want = DATA_PROFILES.get(profile)
    name = next((p for p, d in DATA_PROFILES.items() if d == want), profile)
    return Path("data") / f"{dataset.replace('+', 'plus')}-{name}"


def check_choice(dataset: str, profile: str) -> None:
    if dataset not in VARIANTS:
        raise BenchmarkError(f"unknown dataset {dataset!r}; choose from {', '.join(VARIANTS)}")
    if profile not in DATA_PROFILES:
        raise BenchmarkError(f"unknown profile {profile!r}; choose from {', '.join(PROFILES)}")


def ensure_dataset(dataset: str, profile: str, root: Path, progress: bool = True,
                   default_root: bool = True) -> Path:
    """Reuse the dataset at `root` when it is there, else make it.

    A folder passed by the user is checked for variant and size only; the profile's own folder
    must also have been made with the generator's current settings (supersample), so that an
    old default folder is not scored as if it were the current data.
    """
    from geogen.errors import GeogenError
    from geogen.make import MakeConfig, make_dataset
    from geogen.shards import read_manifest
    want = DATA_PROFILES[profile]
    cfg = MakeConfig(variant=dataset, n=want.n, val=want.val, test=want.test, size=want.size,
                     frames=2, seed=DATA_SEED, out=str(root))
    if (root / "manifest.json").is_file():
        try:
            manifest = read_manifest(root)
        except GeogenError as err:
            raise BenchmarkError(str(err)) from None
        have = (manifest.get("variant"), int(manifest.get("size", -1)))
        if have != (dataset, want.size):
            raise BenchmarkError(f"{root} holds {have[0]} at {have[1]} px, but {dataset} at "
                                 f"{want.size} px is needed; pass another --data folder")
        ss = data_supersample(manifest)
        if default_root and ss is not None and ss != cfg.supersample:  # None: imported data
            raise BenchmarkError(f"{root} was made with --supersample {ss}, the generator now "
                                 f"uses {cfg.supersample}; move that folder away (or pass it "
                                 f"with --data)")
        return root
    try:
        return Path(make_dataset(cfg, resume=True, progress=progress))
    except GeogenError as err:
        raise BenchmarkError(f"making {dataset} in {root}: {err}") from None


def data_supersample(manifest: dict) -> int | None:
    """The subsample count a dataset was made with (None for an imported one)."""
    value = manifest.get("config", {}).get("supersample")
    return None if value is None else int(value)


def read_checked(root: Path, split: str, fields: tuple[str, ...],
                 limit: int | None) -> dict[str, np.ndarray]:
    """geogen.dataset.read_split with its errors as BenchmarkError."""
    from geogen.dataset import read_split
    from geogen.errors import GeogenError
    try:
        return read_split(root, split, fields, limit=limit)
    except GeogenError as err:
        raise BenchmarkError(f"reading the {split} split of {root}: {err}") from None


def to_images(frames: np.ndarray) -> np.ndarray:
    """uint8 (B, H, W, 3) -> float32 (B, 3, H, W) in [0, 1], the methods' input."""
    return np.ascontiguousarray(frames.transpose(0, 3, 1, 2), dtype=np.float32) / 255.0


def evaluate(method: Method, loaded: LoadedModel, data_root: Path, random_state: int,
             test_limit: int | None = None, progress: bool = True) -> dict:
    """Every metric of a model on the test split (frame 0 of each pair), plus k-means.

    Masks and flow are scored on frame 0, the frame whose grid the flow lives on.
    """
    test = read_checked(data_root, "test", TEST_FIELDS, test_limit)
    n, size = len(test["label"]), test["frames"].shape[2]
    if n == 0:
        raise BenchmarkError(f"{data_root} has an empty test split")
    if loaded.image_size != size:
        raise BenchmarkError(f"the checkpoint expects {loaded.image_size} px images but "
                             f"{data_root} holds {size} px; pass matching --data")
    seg, flow, ari = None, FlowScore(), AriScore()
    test_feats = []
    bar = tqdm(range(0, n, EVAL_BATCH), desc="evaluate test", unit="batch", disable=not progress)
    for i in bar:
        j = min(i + EVAL_BATCH, n)
        frames = test["frames"][i:j]  # (B, T, H, W, 3)
        pred = method.predict(loaded.model, to_images(frames[:, 0]), to_images(frames[:, 1]))
        pred.check(j - i, size)
        seg = seg or SegmentationScore(K=pred.masks.shape[1])
        vis = test["visible"][i:j, 0]  # (B, H, W)
        seg.update(pred.masks, pred.visible, test["amodal"][i:j, 0], vis, test["present"][i:j])
        if pred.flow is not None:
            flow.update(pred.flow, test["flow"][i:j, 0], vis)
        ari.update(pred.visible, vis)
        test_feats.append(pred.features)
    train = read_checked(data_root, "train", ("frames", "label"), TRAIN_FEATURES)
    train_feats = [method.embed(loaded.model, to_images(train["frames"][i:i + EVAL_BATCH, 0]))
                   for i in tqdm(range(0, len(train["label"]), EVAL_BATCH), desc="embed train",
                                 unit="batch", disable=not progress)]
    out = {**seg.compute(), **flow.compute(), **ari.compute()}
    out.update(classification_metrics(np.concatenate(train_feats), train["label"],
                                      np.concatenate(test_feats), test["label"], random_state))
    out["n_test"], out["n_train_features"] = int(n), int(len(train["label"]))
    return out


@dataclass(frozen=True)
class RunRequest:
    """One `flowbench run` invocation, resolved from the command line."""

    method: str
    dataset: str = "geo"
    profile: str = "quick"
    seeds: tuple[int, ...] = (0,)
    data: Path | None = None
    results: Path = Path("results")
    runs: Path = Path("runs") / "flowbench"
    device: str = "auto"
    variant: Axes = Axes()
    checkpoint: Path | None = None
    test_limit: int | None = None
    force: bool = False  # redo seeds whose record is already there


def run(req: RunRequest, progress: bool = True, echo=print) -> list[Path]:
    """Make data if needed, then train (or load `checkpoint`), evaluate and record each seed."""
    method = get_method(req.method)
    check_choice(req.dataset, req.profile)
    if req.checkpoint is not None and len(req.seeds) > 1:
        raise BenchmarkError("--checkpoint evaluates one model: give a single seed")
    if req.checkpoint is not None and not Path(req.checkpoint).is_file():
        raise BenchmarkError(f"checkpoint {req.checkpoint} does not exist")  # before making data
    root = Path(req.data) if req.data else default_data_root(req.dataset, req.profile)
    t0 = time.time()
    ensure_dataset(req.dataset, req.profile, root, progress, default_root=req.data is None)
    data_s = time.time() - t0
    from geogen.shards import manifest_hash, read_manifest
    data_info = {"root": str(root), "manifest_hash": manifest_hash(root),
                 "supersample": data_supersample(read_manifest(root)),
                 "profile": asdict(DATA_PROFILES[req.profile]), "data_seed": DATA_SEED}
    written = []
    for seed in req.seeds:
        started, t_run = records.now(), time.time()
        run_seed = derive_seed(seed, method.name, req.dataset)
        stem = records.record_name(method.name, req.dataset, req.profile, seed, req.variant)
        done = _finished(req.results / stem, data_info["manifest_hash"])
        if done and not req.force and req.checkpoint is None:
            # A re-run after an interruption picks up at the first seed without a record.
            echo(f"record exists, skipping seed {seed}: {req.results / stem} (--force redoes it)")
            written.append(req.results / stem)
            continue
        spec = TrainSpec(dataset=req.dataset, profile=req.profile, seed=run_seed, data_root=root,
                         run_dir=req.runs / stem[:-len(".json")], image_size=DATA_PROFILES[req.profile].size,
                         device=req.device, variant=req.variant)
        train_config = method.config(spec)  # fails early on a bad variant or profile
        if req.checkpoint is None and req.force and spec.run_dir.exists():
            # Redo means from scratch: the old run folder would be resumed (or refused when its
            # config differs), not retrained.
            echo(f"--force: removing {spec.run_dir} to train seed {seed} afresh")
            shutil.rmtree(spec.run_dir)
        if req.checkpoint is None:
            echo(f"training {method.name} on {req.dataset} ({req.profile}), seed {seed} "
                 f"-> {spec.run_dir} (resumes if interrupted)")
            checkpoint = method.train(spec)
            train_config_used = train_config
        else:
            checkpoint, train_config_used = Path(req.checkpoint), None
        train_s = time.time() - t_run
        loaded = method.load(checkpoint)
        t_eval = time.time()
        metrics = evaluate(method, loaded, root, run_seed, req.test_limit, progress)
        wall = {"data": data_s, "train": train_s, "eval": time.time() - t_eval,
                "total": time.time() - t_run + data_s}
        rec = records.make_record(
            method=method.name, dataset=req.dataset, profile=req.profile, seed=seed,
            run_seed=run_seed, axes=loaded.axes, variant=req.variant, metrics=metrics,
            # "train": the config this run trained with (None when it evaluated a given
            # checkpoint); "trained_with": what the evaluated checkpoint says of its training.
            config={"train": train_config_used, "model": loaded.config,
                    "trained_with": loaded.trained_with}, data=data_info,
            checkpoint=str(checkpoint), device=req.device, wall=wall, started_at=started)
        path = records.write_record(req.results, rec)
        data_s = 0.0  # only the first seed paid for the data
        iou = metrics["amodal_iou"]["all"]
        echo(f"record: {path}")
        echo(f"amodal IoU (fixed assignment): all {_fmt(iou)}, "
             + ", ".join(f"{k} {_fmt(metrics['amodal_iou'][k])}" for k in ("circle", "square", "triangle")))
        written.append(path)
    return written


def _finished(path: Path, manifest: str) -> bool:
    """Whether a current record for this run on this exact data was written here.

    The record's checkpoint must exist on this machine too: records committed to the
    repository (made elsewhere) do not stop a fresh clone from running.
    """
    if not path.is_file():
        return False
    try:
        rec = records.read_record(path)
    except BenchmarkError:
        return False  # an old or broken record is simply redone
    ckpt = rec.get("checkpoint")
    # Only a trained run counts: a record made with --checkpoint (no train config) evaluated
    # someone's model, and `flowbench run` must still train its own.
    trained = (rec.get("config") or {}).get("train") is not None
    return (trained and rec.get("data", {}).get("manifest_hash") == manifest and bool(ckpt)
            and Path(ckpt).is_file())


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def ablation_grid(dataset: str) -> list[Axes]:
    """Table 3's runs: the default model plus one change per row that differs from it."""
    grid = [Axes(), Axes(num_capsules=4), Axes(num_capsules=16), Axes(shape_dim=3),
            Axes(shape_dim=11)]
    if dataset == "geo":  # the paper ablates these on Geo only
        grid += [Axes(decoder_depth=2), Axes(decoder_depth=6), Axes(depth_ordering=False)]
    return grid
