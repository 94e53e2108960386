"""The data a run reads: a profile's folders, made only when asked or when they are the defaults.

Letters: B batch, T frames, H = W image side.

Four kinds of folder, all generated with `profiles.DATA_SEED`:
- a profile's data (`profiles.default_data_root`): what training reads, made if missing;
- the evaluation set of a checkpoint run (`profiles.eval_data_root`): the profile's test split
  and only the training pairs that the k-means protocol fits on (`TRAIN_FEATURES`), never a
  training set;
- the test split alone, for a method that trains nothing (`profiles.test_data_root`), where
  neither folder above is there;
- a few test pairs for `flowbench show` (under runs/show-data).
geogen draws every sample from its own stream (seed, split, index), so the first N pairs of a
split are the same pairs in any of these folders made with the same settings.
A folder the user names is never made unless they ask (`--make-data`).
"""
from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from benchmark.errors import BenchmarkError
from benchmark.profiles import DATA_SEED, get_profile

TRAIN_FEATURES = 10000  # train pairs embedded to fit k-means (all of them when fewer)
SMALL = 5000  # pairs: a set this small is made in this process (starting workers costs more)
SHOW_DATA = Path("runs") / "show-data"


def current_supersample() -> int:
    """The subsample count geogen makes data with now."""
    from geogen.make import MakeConfig
    return MakeConfig().supersample


def make_config(dataset: str, root: Path, *, n: int, val: int, test: int, size: int,
                frames: int = 2, supersample: int | None = None, seed: int = DATA_SEED,
                look: str | None = None):
    from geogen.make import MakeConfig
    extra = {} if supersample is None else {"supersample": supersample}
    if look is not None:  # None: geogen's default (the paper's look)
        extra["look"] = look
    workers = 1 if n + val + test < SMALL else 0  # 0: one per core; the bytes are the same
    return MakeConfig(variant=dataset, n=n, val=val, test=test, size=size, frames=frames,
                      seed=seed, out=str(root), workers=workers, **extra)


def profile_config(dataset: str, profile: str, root: Path, frames: int = 2):
    p = get_profile(profile)
    return make_config(dataset, root, n=p.train, val=p.val, test=p.test, size=p.size,
                       frames=frames)


def eval_config(dataset: str, profile: str, root: Path):
    p = get_profile(profile)
    return make_config(dataset, root, n=min(p.train, TRAIN_FEATURES), val=0, test=p.test,
                       size=p.size)


def test_config(dataset: str, profile: str, root: Path):
    """The profile's test split alone, for a method that trains nothing (geogen makes at least
    one training pair)."""
    p = get_profile(profile)
    return make_config(dataset, root, n=1, val=0, test=p.test, size=p.size)


def data_supersample(manifest: dict) -> int | None:
    """The subsample count a dataset was made with (None for an imported one)."""
    value = manifest.get("config", {}).get("supersample")
    return None if value is None else int(value)


def data_look(manifest: dict) -> str | None:
    """The look a dataset's textures were made in (geogen.schema.look_of: "camouflage" for a
    Geo+ folder made before looks were recorded); None for data without textures."""
    from geogen.schema import look_of
    return look_of(manifest)


def read_manifest_checked(root: Path) -> dict:
    from geogen.errors import GeogenError
    from geogen.shards import read_manifest
    try:
        return read_manifest(root)
    except GeogenError as err:
        raise BenchmarkError(str(err)) from None


def ensure(cfg, root: Path, *, may_make: bool, own_folder: bool, progress: bool = True,
           echo=print) -> Path:
    """The dataset at `root` checked against `cfg`, made first when missing and `may_make`.

    Every folder must hold cfg's variant at cfg's size with at least cfg's frames. A folder the
    benchmark names itself (`own_folder`) must also match cfg's counts and have been made with
    the generator's current settings (supersample, and for Geo+ the look: a folder of the
    former camouflage look is not trained or scored as the paper's Geo+), so an old default
    folder is not scored as if it were the current data; a folder the user names is taken as
    it is (its record notes its look).
    A missing folder is made under a lock (`making_lock`), so processes that need the same
    folder at once make it once: the others wait, then find it whole.
    """
    from geogen.errors import GeogenError
    from geogen.make import make_dataset
    from geogen.stopping import signals_stop
    if (root / "manifest.json").is_file():  # written last, by a rename: the folder is whole
        return _checked(cfg, root, own_folder)
    if not may_make:
        what = "is not a dataset (no manifest.json)" if root.exists() else "does not exist"
        raise BenchmarkError(f"data folder {root} {what}; pass --make-data to make the "
                             f"profile's data there")
    with making_lock(root, echo):
        if (root / "manifest.json").is_file():  # another process made it while this one waited
            return _checked(cfg, root, own_folder)
        echo(f"making {cfg.variant} in {root}: {cfg.counts()} pairs at {cfg.size} px "
             f"(resumes if interrupted)")
        stop, received = threading.Event(), []
        try:
            # geogen make's rule: a Ctrl-C or SIGTERM stops the making between two work units,
            # the whole shards kept for the resume.
            with signals_stop(stop, received):
                return Path(make_dataset(cfg, resume=True, progress=progress, stop=stop))
        except GeogenError as err:
            raise BenchmarkError(f"making {cfg.variant} in {root}: {err}") from None
        except KeyboardInterrupt:
            if received:  # hand the signal on to the handler outside (flowbench's names it)
                signal.raise_signal(received[0])
            raise


@contextmanager
def making_lock(root: Path, echo=print) -> Iterator[None]:
    """Hold an exclusive lock on `.<name>.lock` beside the folder while it is made. geogen's
    resume would otherwise let a second maker delete the first one's unfinished shards. The
    lock goes with the process (flock), so a killed maker leaves nothing held."""
    import fcntl
    root = Path(root)
    try:
        root.parent.mkdir(parents=True, exist_ok=True)
        handle = open(root.parent / f".{root.name}.lock", "a")
    except OSError as err:
        raise BenchmarkError(f"cannot make {root}: {err.strerror or err}") from None
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            echo(f"waiting for another process making {root}")
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield  # closing the file releases the lock


def _checked(cfg, root: Path, own_folder: bool) -> Path:
    manifest = read_manifest_checked(root)
    have = (manifest.get("variant"), int(manifest.get("size", -1)))
    if have != (cfg.variant, cfg.size):
        raise BenchmarkError(f"{root} holds {have[0]} at {have[1]} px, but {cfg.variant} at "
                             f"{cfg.size} px is needed; pass another --data folder")
    if int(manifest.get("frames", 2)) < cfg.frames:
        raise BenchmarkError(f"{root} holds clips of {manifest.get('frames')} frames; "
                             f"{cfg.frames} are needed")
    ss = data_supersample(manifest)
    if own_folder and ss is not None:  # None: imported data, taken as it is
        if ss != cfg.supersample:
            raise BenchmarkError(f"{root} was made with --supersample {ss}, the generator "
                                 f"now uses {cfg.supersample}; move that folder away (or "
                                 f"pass it with --data)")
        look, want = data_look(manifest), data_look({"variant": cfg.variant,
                                                     "config": cfg.content()})
        if look != want:
            unrecorded = " (made before geogen recorded looks)" if "look" not in \
                manifest.get("config", {}) else ""
            raise BenchmarkError(f"{root} holds {cfg.variant} in the {look} look{unrecorded}, "
                                 f"this run needs the {want} look; move that folder away (or "
                                 f"pass it with --data)")
        counts = {k: int(v) for k, v in manifest.get("counts", {}).items()}
        if counts != cfg.counts():
            raise BenchmarkError(f"{root} holds {counts} pairs, this profile makes "
                                 f"{cfg.counts()}; move that folder away (or pass it with "
                                 f"--data)")
    return root


def show_data(dataset: str, size: int, pairs: int, supersample: int | None,
              seed: int = DATA_SEED, progress: bool = False, echo=print,
              look: str | None = None) -> Path:
    """A folder of the first `pairs` test pairs (rounded up to 16) of a dataset made with these
    settings: what `flowbench show` draws when the full folder is not on this machine."""
    from geogen.schema import DEFAULT_LOOK, PHOTO_VARIANTS
    pairs = max(16, pairs)
    ss = f"-ss{supersample}" if supersample is not None else ""
    # Geo+ folders carry their look in the name: one made before looks existed is never reused.
    look = (look or DEFAULT_LOOK) if dataset in PHOTO_VARIANTS else None
    lk = f"-{look}" if look is not None else ""
    root = SHOW_DATA / f"{dataset.replace('+', 'plus')}{lk}-{size}px{ss}-seed{seed}-test{pairs}"
    cfg = make_config(dataset, root, n=1, val=0, test=pairs, size=size,
                      supersample=supersample, seed=seed, look=look)
    if not (root / "manifest.json").is_file():
        echo(f"making the first {pairs} test pairs of {dataset} (data seed {seed}) in {root}")
    try:
        return ensure(cfg, root, may_make=True, own_folder=True, progress=progress,
                      echo=lambda _: None)
    except BenchmarkError as err:
        raise BenchmarkError(f"{err}; or make test pairs yourself: geogen make --variant "
                             f"{dataset} --n 1 --val 0 --test {pairs} --size {size} --seed "
                             f"{seed}{f' --look {look}' if look else ''} --out DIR, then pass "
                             f"--data DIR") from None


# Data whose Table 1 rows score groups of slots: the paper's Exercise parts are whole limbs,
# so the articulated figure's rows are its manifest's groups of these names (a leg: the upper
# and the lower leg); every part is scored on its own as well.
TABLE1_GROUPS: dict[str, tuple[str, ...]] = {"articulated": ("torso", "left leg", "right leg"),
                                             "articulated+": ("torso", "left leg", "right leg")}


def targets(manifest: dict) -> tuple[tuple[str, ...], dict[str, tuple[int, ...]]]:
    """(the data's slot names, {Table 1 group: its slot indices}; empty when its rows are the
    slots themselves), from its manifest."""
    from geogen.schema import slots_of
    slots = slots_of(manifest)
    names = TABLE1_GROUPS.get(str(manifest.get("variant")), ())
    found = manifest.get("groups") or {}
    missing = [g for g in names if g not in found]
    if missing:
        raise BenchmarkError(f"the manifest names no group {missing[0]!r} of slots; make the "
                             f"data again with this geogen")
    try:
        return slots, {g: tuple(slots.index(p) for p in found[g]) for g in names}
    except ValueError as err:
        raise BenchmarkError(f"the manifest's groups name a slot it lacks ({err})") from None


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


def to_flow(flow: np.ndarray) -> np.ndarray:
    """geogen's (B, H, W, 2) flow -> the methods' (B, 2, H, W) float32 (dx, dy) in pixels."""
    return np.ascontiguousarray(np.moveaxis(flow, -1, 1), dtype=np.float32)
