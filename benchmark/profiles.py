"""The benchmark's profiles: one record each, the single source for every place that names them.

A profile fixes the data every method trains and is tested on (split sizes, image side) and
where its cells rank in the tables. How long a method takes on it is the method's own business
(`Method.budgets`). The runner's data folders, the CLI's `--profile` choices and help,
`flowbench list` and the tables' order all read `PROFILES`.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from benchmark.errors import BenchmarkError

DATA_SEED = 0  # every profile's data is made with this seed, shared by all methods and seeds


@dataclass(frozen=True)
class Profile:
    """One profile: its data and its place in the tables."""

    name: str
    train: int  # training pairs
    val: int
    test: int
    size: int  # image side in pixels
    rank: int  # a table cell shows the profile of highest rank that has records
    summary: str  # one line for the CLI's help and `flowbench list`
    hidden: bool = False  # accepted everywhere, listed nowhere (the contract test's profile)
    gpu: bool = False  # its budgets are a GPU's: training it on a CPU is asked for by name

    def data_sizes(self) -> tuple[int, int, int, int]:
        return (self.train, self.val, self.test, self.size)


PROFILES: dict[str, Profile] = {p.name: p for p in (
    Profile("quick", train=40000, val=400, test=10000, size=64, rank=1,
            summary="CPU, tens of minutes: the paper's 10k test pairs, 40k training pairs"),
    Profile("gpu", train=100000, val=1000, test=10000, size=64, rank=2,
            summary="one GPU, minutes: the paper's 100k training pairs", gpu=True),
    Profile("long", train=100000, val=1000, test=10000, size=64, rank=3,
            summary="CPU, hours: the paper's 100k training pairs, trained longer"),
    Profile("paper", train=100000, val=10000, test=10000, size=64, rank=4,
            summary="the paper's scale and schedule (many GPU hours)", gpu=True),
    Profile("smoke", train=300, val=20, test=60, size=32, rank=0, hidden=True,
            summary="seconds: the contract test's tiny profile"),
)}


def visible() -> tuple[str, ...]:
    """The profiles the CLI lists, in the order written above (which also names the shared
    data folders: see data_name)."""
    return tuple(name for name, p in PROFILES.items() if not p.hidden)


def get_profile(name: str) -> Profile:
    if name not in PROFILES:
        raise BenchmarkError(f"unknown profile {name!r}; choose from {', '.join(visible())}")
    return PROFILES[name]


def by_rank() -> tuple[str, ...]:
    """Profile names, highest rank (the one a table cell shows first) first."""
    return tuple(sorted(PROFILES, key=lambda n: -PROFILES[n].rank))


def data_name(profile: str) -> str:
    """The first profile (in PROFILES' order) with the same data, so profiles that train on
    the same pairs share one folder instead of making it twice (long shares gpu's)."""
    want = get_profile(profile).data_sizes()
    return next(n for n, p in PROFILES.items() if p.data_sizes() == want)


def dataset_folder(dataset: str) -> str:
    """'geo+' -> 'geoplus': a dataset's name in file and folder names."""
    return dataset.replace("+", "plus")


def default_data_root(dataset: str, profile: str, clip_frames: int = 2) -> Path:
    """data/<dataset>-<data name>, with -t<T> for training clips longer than pairs."""
    suffix = f"-t{clip_frames}" if clip_frames != 2 else ""
    return Path("data") / f"{dataset_folder(dataset)}-{data_name(profile)}{suffix}"


def eval_data_root(dataset: str, profile: str) -> Path:
    """Where a checkpoint's evaluation makes only what it reads (see benchmark.datasets)."""
    return Path("data") / f"{dataset_folder(dataset)}-{data_name(profile)}-eval"


def test_data_root(dataset: str, profile: str) -> Path:
    """Where a method that trains nothing makes only the test pairs it reads."""
    return Path("data") / f"{dataset_folder(dataset)}-{data_name(profile)}-test"
