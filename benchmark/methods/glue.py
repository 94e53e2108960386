"""What every adapter shares: the checkpoint path check, the evaluation device, a method's own
error as the benchmark's one line, the refusal of Table 3 axes a method lacks, tensors to arrays,
and the checked ground-truth flow of the methods that read it.

torch is imported inside the functions, so `flowbench table` and `list` start without it.
"""
from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path
from typing import Iterator

import numpy as np

from benchmark.errors import BenchmarkError
from benchmark.registry import Axes


def checkpoint_file(path: str | Path) -> Path:
    """`path` if it is a file; the one-line error every adapter gives otherwise."""
    if not Path(path).is_file():
        raise BenchmarkError(f"checkpoint {path} does not exist")
    return Path(path)


def eval_device() -> str:
    """Evaluation runs where it is fastest: the GPU when there is one."""
    import torch
    return "cuda" if torch.cuda.is_available() else "cpu"


@contextlib.contextmanager
def one_line(kind: type[Exception] | tuple[type[Exception], ...], what: str) -> Iterator[None]:
    """A method's own error (`kind`, or any of several) re-raised as
    BenchmarkError("what: message")."""
    try:
        yield
    except kind as err:
        raise BenchmarkError(f"{what}: {err}") from None


def load_checkpoint(store, error: type[Exception], what: str, path: str | Path):
    """A model through its method's checkpoint module (`store`: trainloop.checkpoint's Kind
    functions read, load, config_of, meta_of), on the evaluation device, and what the file says
    of its training, {"config": dict, "meta": dict}. A missing, corrupt or foreign file is one
    BenchmarkError line `cannot load PATH as WHAT checkpoint: ...` (`what`: "a psd")."""
    with one_line(error, f"cannot load {path} as {what} checkpoint"):
        blob = store.read(checkpoint_file(path))
        model = store.load(path, device=eval_device())
        return model, {"config": dataclasses.asdict(store.config_of(blob)),
                       "meta": store.meta_of(blob)}


def refuse_axes(name: str, variant: Axes, allowed: tuple[str, ...] = ()) -> None:
    """BenchmarkError naming the Table 3 axes a spec sets that the method has not."""
    wrong = [f.name for f in dataclasses.fields(Axes)
             if getattr(variant, f.name) is not None and f.name not in allowed]
    if wrong:
        can = f"; it varies only {', '.join(allowed)}" if allowed else ""
        raise BenchmarkError(f"{name} has no Table 3 axes {', '.join(wrong)}{can}; run it "
                             f"without them")


def k_config(name: str, error: type[Exception], profile, k_for, spec):
    """The training config of a method whose one Table 3 axis is K (`num_capsules`):
    `profile(profile_name, out, k)` with K = `k_for(the data's part count)` unless the spec's
    variant sets it, then the spec's seed, device and image side; validated, its errors one
    BenchmarkError line `NAME config: ...`."""
    v = spec.variant
    refuse_axes(name, v, allowed=("num_capsules",))
    k = k_for(len(spec.slots)) if v.num_capsules is None else v.num_capsules
    with one_line(error, f"{name} config"):
        cfg = profile(spec.profile, str(spec.run_dir), k)
        cfg = cfg.replace(loop={"seed": spec.seed, "device": spec.device},
                          model={"image_size": spec.image_size})
        cfg.validate()
    return cfg


def to_numpy(t) -> np.ndarray:
    """A tensor on any device, in any float type, as a float32 array."""
    return t.float().cpu().numpy()


def gt_flow_tensor(name: str, why: str, model, gt_flow: np.ndarray | None,
                   image_shape: tuple[int, ...]):
    """The ground-truth flow (B, 2, H, W) as a float32 tensor on the model's device, for a
    method whose `uses_ground_truth` has "flow"; BenchmarkError (naming the method and `why`
    it reads the flow) when it is missing or of another shape than the images'."""
    import torch
    if gt_flow is None:
        raise BenchmarkError(f"{name} needs the ground-truth flow at test time (gt_flow): {why}; "
                             f"the runner passes it to methods that declare "
                             f"uses_ground_truth = ('flow',)")
    b, _, h, w = image_shape
    if gt_flow.shape != (b, 2, h, w):
        raise BenchmarkError(f"gt_flow must be (B={b}, 2, {h}, {w}), got {gt_flow.shape}")
    dev = next(model.parameters()).device
    return torch.from_numpy(np.ascontiguousarray(gt_flow, dtype=np.float32)).to(dev)
