"""The memory a training config needs per step, checked against what the machine has before any
work: a config that cannot fit (`--set model.num_capsules=1000`) is one line, not a process the
kernel kills without a word.

Letters: B batch per rank, K capsules, C capsule size, P points per image (with the smoothness
neighbours), Hd decoder width, H = W image side.

The estimate is arithmetic on the config, an upper bound of the eager float32 step (compile and
bf16 only lower it): parameters with their gradient and Adam's two moments, the encoder's
activations, the blurred pyramids and, dominating every large config, what the loss keeps for the
backward pass per (B, K, P): the decoder's Hd-wide layers, and with "over" layering K more per
point (the (B, K, K, P) occlusion tensors of `model.composite_over`). The constants were fitted to
the peak resident memory of tiny configs (experiments/2026-12-07-memory-estimate).
The training pairs themselves are not counted: the config does not say how many a dataset holds.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from flowcaps.errors import FlowcapsError

if TYPE_CHECKING:
    from flowcaps.config import TrainConfig

GIB = 2 ** 30
FLOAT = 4  # bytes; bf16 autocast keeps float32 weights and float32 mask maths
# Per (B, K, P) and direction the backward pass keeps each SELU's input and output (2 Hd a
# layer) and about POINT_FLOATS more: canonical coordinates, masks, visibility, per-capsule flow.
# While it runs, about BACKWARD_HD Hd-wide gradients and BACKWARD_FLOATS others exist besides.
POINT_FLOATS, BACKWARD_HD, BACKWARD_FLOATS = 30, 2, 20
# composite_over keeps two (B, K, K, P) tensors per direction (1 - cover, its clamp) for the
# backward pass, which makes about three more of that size while it runs.
OVER_KEPT, OVER_BACKWARD = 2, 3
ENCODER_FLOATS = 4  # per encoder activation: conv output, norm, ReLU, pooled/grad
PARAM_BYTES = 5 * FLOAT  # weight, gradient, Adam's two moments, a DDP bucket of the gradient
# Peak resident memory is above the live tensors: torch itself, the compiled step's code, and
# the heap that keeps freed blocks for reuse (trainloop.allocator) and so fragments (fitted).
RUNTIME_BYTES = 0.6 * GIB
HEAP_FACTOR = 1.6

# What drives each part of the estimate: the settings a refusal names.
DECODER = ("model.num_capsules", "model.dec_hidden", "model.dec_depth", "batch_size", "points")
OCCLUSION = ("model.num_capsules", "batch_size", "points")
ENCODER = ("model.image_size", "model.enc_channels", "batch_size")
PARAMETERS = ("model.num_capsules", "model.capsule_dim", "model.enc_hidden")


@dataclass(frozen=True)
class Estimate:
    """Bytes one rank needs, by the settings that drive each part."""

    parts: dict[tuple[str, ...], float]  # settings -> bytes per rank
    ranks: int

    @property
    def per_rank(self) -> float:
        return RUNTIME_BYTES + sum(self.parts.values())

    @property
    def total(self) -> float:
        return self.per_rank * self.ranks

    @property
    def drivers(self) -> tuple[str, ...]:
        return max(self.parts, key=self.parts.__getitem__)


def _points(cfg: "TrainConfig") -> int:
    """P: the points the loss evaluates per image, the smoothness neighbours included."""
    hw = cfg.model.image_size ** 2
    p = hw if cfg.points <= 0 or cfg.points >= hw else cfg.points
    return p + (2 * min(cfg.smooth_points, p) if cfg.w_smooth > 0 else 0)


def _parameters(cfg: "TrainConfig") -> int:
    """The model's parameter count, as model.FlowCapsules builds it (biases included)."""
    m = cfg.model
    k, c = m.num_capsules, m.capsule_dim
    chans = [3 + 2 * m.coord_channels, *m.enc_channels]
    n = sum(9 * a * b + b for a, b in zip(chans, chans[1:]))  # 3x3 convs
    n += sum(2 * ch for ch in m.enc_channels[1:]) if m.enc_norm else 0
    side = m.image_size // 2 ** len(m.enc_channels)
    n += (chans[-1] * side * side + 1) * m.enc_hidden + (m.enc_hidden + 1) * k * c  # fc, head
    if m.translation_head == "softargmax":
        heat_block = max(len(m.enc_channels) - 2, 0)
        side_h = m.image_size // 2 ** heat_block
        n += (m.enc_channels[heat_block] + 1) * k + k * side_h * side_h  # heat conv, prior
        if m.pooled_params:
            n += (m.enc_channels[heat_block] + 1) * m.enc_hidden + (m.enc_hidden + 1) * c
    n += (m.shape_dim + 3) * m.dec_hidden + (m.dec_depth - 1) * (m.dec_hidden + 1) * m.dec_hidden
    return n + m.dec_hidden + 1 + (k * m.shape_dim if m.shape_code == "capsule" else 0)


def estimate(cfg: "TrainConfig", ranks: int) -> Estimate:
    """The peak memory of one training step of `cfg` on each of `ranks` processes."""
    m = cfg.model
    b = max(cfg.loop.batch_size // ranks, 1)
    k, p = m.num_capsules, _points(cfg)
    dirs = 2 if cfg.both_directions else 1  # both graphs are alive until the backward pass
    hd = m.dec_hidden
    decoder = b * k * p * (dirs * (2 * m.dec_depth * hd + POINT_FLOATS)
                           + BACKWARD_HD * hd + BACKWARD_FLOATS)  # floats
    over = m.layering == "over" and m.depth_ordering
    occlusion = b * k * k * p * (dirs * OVER_KEPT + OVER_BACKWARD) if over else 0
    side, encoder = m.image_size, 0
    for ch in m.enc_channels:  # both frames of each pair go through the encoder
        encoder += 2 * b * ch * side * side * ENCODER_FLOATS
        side //= 2
    encoder += 2 * b * 3 * m.image_size ** 2 * (len(cfg.blur_sigmas) + 2)  # frames, pyramids
    parts = {DECODER: decoder, OCCLUSION: occlusion, ENCODER: encoder}
    parts = {n: v * FLOAT * HEAP_FACTOR for n, v in parts.items()}
    parts[PARAMETERS] = float(_parameters(cfg) * PARAM_BYTES)
    return Estimate(parts=parts, ranks=ranks)


def available_cpu() -> float:
    """MemAvailable of /proc/meminfo in bytes; infinite where there is none (not Linux)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    return float("inf")


def available_cuda() -> float:
    """Free memory of the current CUDA device in bytes; unknown (inf: nothing refused) where
    torch cannot read it (a driver error; no CUDA build: the device check then says so)."""
    import torch
    try:
        return float(torch.cuda.mem_get_info()[0])
    except (RuntimeError, AssertionError):
        return float("inf")


def _where(cfg: "TrainConfig") -> tuple[str, int]:
    """The device type the run trains on and the processes it starts on this node."""
    from flowcaps.launch import ranks_for
    device = cfg.loop.device
    if device != "cpu":
        import torch
        # "cuda" on a machine without one is trainloop.resolve_device's one line, later
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return device, ranks_for(cfg, device)


def check(cfg: "TrainConfig", available: Callable[[str], float] | None = None) -> None:
    """A FlowcapsError in one line when a step of `cfg` needs more memory than this machine has:
    on a CPU MemAvailable shared by the ranks, on a GPU the device's free memory (one rank each).
    `available(kind)` gives the free bytes for "cpu" or "cuda" (tests pass their own)."""
    if "WORLD_SIZE" in os.environ:  # a rank: its launcher checked the whole run
        return
    kind, ranks = _where(cfg)
    est = estimate(cfg, ranks)
    free = (available or (lambda kd: available_cuda() if kd == "cuda" else available_cpu()))(kind)
    if est.total <= free:
        return
    values = ", ".join(f"{n}={_value(cfg, n)}" for n in est.drivers)
    *most, last = est.drivers
    where = "this GPU has" if kind == "cuda" else "this machine has"
    raise FlowcapsError(f"{values} need about {est.total / GIB:.1f} GiB per training step "
                        f"({ranks} rank{'s' * (ranks > 1)}); {where} {free / GIB:.1f} GiB "
                        f"available: lower {', '.join(most)} or {last}")


def _value(cfg: "TrainConfig", name: str) -> object:
    if name.startswith("model."):
        value = getattr(cfg.model, name[len("model."):])
        return list(value) if isinstance(value, tuple) else value
    return cfg.loop.batch_size if name == "batch_size" else getattr(cfg, name)
