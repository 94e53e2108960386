"""SCAE and FlowSCAE behind the benchmark protocol (the paper's Table 2).

Letters: B batch, M part capsules, K object capsules, F part features, H = W image side.

Features for clustering, both methods: the object-capsule presences a_k (B, K), one of the
two vectors SCAE's own evaluation clusters (the other, the part mass each capsule explains,
is measured in docs/baselines/scae.md). SCAE clusters them as they are, so k-means here skips
the benchmark's feature standardisation (`standardise_features = False`).

scae: SCAE (baselines.scae) trained on frame 0 images. Masks: each part's placed template
alpha times its presence (amodal: a template is whole whatever covers it); visible: the
pixel mixture's responsibilities of the parts, normalised with the background's over the
mixture (they sum to at most 1), which the metrics threshold at 1/2 as given.

flowscae: the paper's FlowSCAE. FlowCapsules' encoder (a trained checkpoint) gives each image
K part capsules: its pose (tx, ty, angle, scale) as an affine, a presence from its visible
share, its shape code and depth; an SCAE object capsule autoencoder is trained to explain the
present parts' poses. Masks and visibility are FlowCapsules' own.

torch, flowcaps and baselines are imported inside the functions, so `flowbench table` and
`flowbench list` start without loading torch.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmark.bench import Subject, cores, image_side, synthetic_pairs
from benchmark.errors import BenchmarkError
from benchmark.methods.glue import checkpoint_file, eval_device, one_line, refuse_axes, to_numpy
from benchmark.registry import (LOOP_BATCH, LOOP_ROWS, Axes, LoadedModel, LoopCase, Prediction,
                                TrainSpec, register)

ENCODE_BATCH = 200  # images per FlowCapsules encoder call when making FlowSCAE's parts
PRESENCE_GRID = 16  # side of the grid on which a FlowCapsules part's visible share is measured
BUDGETS = {
    "smoke": "12 steps of 8 images at 32 px: seconds (for tests)",
    "quick": "9,000 steps of 32 images: about 24 minutes of training on a 2-core CPU, 30 with "
             "evaluation on 10k test pairs",
    "gpu": "12,000 steps of 128 images: an estimated 10 minutes of training on one GPU (not "
           "measured)",
}
FLOW_BUDGETS = {
    "smoke": "a tiny FlowCapsules and 12 OCAE steps of 8 at 32 px: seconds (for tests)",
    "quick": "32,000 OCAE steps of 128 part sets on a committed FlowCapsules checkpoint: about "
             "12 minutes of training on a 2-core CPU, 20 with the parts of 40k images and "
             "evaluation on 10k test pairs",
    "gpu": "32,000 OCAE steps of 128 part sets: an estimated 15 minutes on one GPU (not "
           "measured)",
}


def _profile(kind: str, spec: TrainSpec):
    from baselines.scae import ScaeError, profile
    refuse_axes(kind, spec.variant)
    with one_line(ScaeError, f"{kind} config"):
        return profile(kind, spec.profile, spec.dataset).replace(
            loop={"seed": spec.seed, "device": spec.device, "out": str(spec.run_dir)})


def _read(checkpoint: Path, kind: str):
    """(model, config, meta) of an SCAE-package checkpoint of the given kind."""
    from baselines.scae import ScaeError, checkpoint as ckpt
    with one_line(ScaeError, f"cannot load {checkpoint} as a {kind} checkpoint"):
        blob = ckpt.read(checkpoint_file(checkpoint))
        cfg = ckpt.config_of(blob)
        if cfg.kind != kind:
            raise BenchmarkError(f"{checkpoint} holds a {cfg.kind} model, not {kind}")
        model = ckpt.load(checkpoint, device=eval_device())
    return model, cfg, ckpt.meta_of(blob)


def _subject(kind: str, cfg, rows) -> tuple[Subject, None]:
    """The SCAE package's step on one batch of `rows`; it trains eager in float32, so there
    is no second subject."""
    from baselines.scae.trainer import ScaeTask
    return Subject(kind, ScaeTask(cfg), (rows,), cfg.loop.threads or cores(), None), None


def _loop_case(kind: str, data) -> LoopCase:
    """A tiny run of the smoke profile's `kind` on `data(rng)`, a tensor of LOOP_ROWS rows."""
    import torch
    from baselines.scae import ScaeError, profile, trainer

    def config(out: Path, steps: int):
        cfg = profile(kind, "smoke", "geo")
        if kind == "flowscae":
            cfg = cfg.replace(parts={"n_parts": 4, "n_features": 2})  # as `data` makes them
        return cfg.replace(loop={"out": str(out), "steps": steps, "batch_size": LOOP_BATCH,
                                 "checkpoint_minutes": 0.0, "log_every": 1, "threads": 1})

    def fit(cfg, meta=None) -> Path:
        rows = torch.from_numpy(data(np.random.default_rng(0)))
        return trainer.fit(cfg, rows, progress=False, meta=meta)

    return LoopCase(trainer.ScaeTask, config, fit, ScaeError,
                    lambda c: c.replace(optim={"lr": 1e-3}), "optim.lr")


@register
class SCAEMethod:
    name = "scae"
    title = "SCAE"
    tables = (2,)
    amodal = True
    uses_ground_truth: tuple[str, ...] = ()
    clip_frames = 2
    standardise_features = False  # SCAE's protocol clusters raw presences in [0, 1]
    budgets = BUDGETS

    def _config(self, spec: TrainSpec):
        cfg = _profile("scae", spec)
        cfg = cfg.replace(pcae={"image_size": spec.image_size})
        from baselines.scae import ScaeError
        with one_line(ScaeError, "scae config"):
            cfg.validate()
        return cfg

    def config(self, spec: TrainSpec) -> dict[str, Any]:
        return dataclasses.asdict(self._config(spec))

    def train(self, spec: TrainSpec) -> Path:
        from baselines.scae import ScaeError, train_scae
        with one_line(ScaeError, "scae training"):
            return Path(train_scae(self._config(spec), spec.data_root))

    def load(self, checkpoint: Path) -> LoadedModel:
        model, cfg, meta = _read(checkpoint, "scae")
        config = dataclasses.asdict(cfg)
        return LoadedModel(model=model, config=config, axes=Axes(),
                           image_size=cfg.pcae.image_size,
                           trained_with={"config": config, "meta": meta})

    def predict(self, model: Any, img0: np.ndarray, img1: np.ndarray, *,
                gt_flow: np.ndarray | None = None) -> Prediction:
        """Parts of img0 only: SCAE sees single images (img1 and gt_flow are not used)."""
        import torch
        dev = next(model.parameters()).device
        out = model.infer(torch.from_numpy(img0).to(dev))
        return Prediction(masks=to_numpy(out.masks), visible=to_numpy(out.visible), flow=None,
                          features=to_numpy(out.prior),
                          extras={"templates": to_numpy(out.templates),
                                  "reconstruction": to_numpy(out.reconstruction)})

    def embed(self, model: Any, img0: np.ndarray, *,
              gt_flow: np.ndarray | None = None) -> np.ndarray:
        import torch
        dev = next(model.parameters()).device
        return to_numpy(model.infer(torch.from_numpy(img0).to(dev)).prior)  # (B, K)

    def bench_subjects(self, profile: str, settings: tuple[str, ...]) -> tuple[Subject, None]:
        """Frame 0 images of the profile's side; no settings."""
        import torch
        from baselines.scae import profile as scae_profile
        cfg = scae_profile("scae", profile).replace(pcae={"image_size": image_side(profile)})
        pairs = synthetic_pairs(cfg.loop.batch_size, cfg.pcae.image_size)  # (B, 2, H, W, 3)
        return _subject("scae", cfg, torch.from_numpy(pairs[:, 0].copy()))  # (B, H, W, 3)

    def loop_case(self) -> LoopCase:
        return _loop_case("scae", lambda rng: rng.integers(0, 256, (LOOP_ROWS, 32, 32, 3),
                                                           dtype=np.uint8))


@dataclass
class FlowSCAEModel:
    """A FlowCapsules model and the object capsule autoencoder trained on its parts."""

    flow: Any  # flowcaps.FlowCapsules, eval mode
    ocae: Any  # baselines.scae.FlowSCAE, eval mode


def flowcaps_parts(flow_model, images, presence_area: float) -> Any:
    """FlowSCAE's part capsules of images (B, 3, H, W): (B, K, 6 + 1 + F) on their device.

    Per part: its pose as a row-major 2x3 affine (u = s R(a) v + t); a presence, which
    FlowCapsules does not have: its visible share of the image (Lambda+_k on a 16 x 16 grid of
    pixel centres) over `presence_area`, capped at 1, so a capsule that owns no pixels is
    absent; then its shape code and depth.
    """
    import torch
    from baselines.scae.geometry import similarity
    from flowcaps import geometry
    with torch.inference_mode():
        shape, pose, depth = flow_model.encode(images)  # (B, K, C-5), (B, K, 4), (B, K)
        u = geometry.pixel_centres(PRESENCE_GRID, PRESENCE_GRID, images.device)
        visible = flow_model.masks_at(shape, pose, depth, u.expand(len(images), -1, -1)).visible
        presence = (visible.mean(-1) / presence_area).clamp(max=1.0)  # (B, K)
        affine = similarity(pose[..., 0], pose[..., 1], pose[..., 2], pose[..., 3])
        return torch.cat([affine.flatten(-2), presence[..., None], shape, depth[..., None]],
                         -1)  # (B, K, 7 + F)


@register
class FlowSCAEMethod:
    name = "flowscae"
    title = "FlowSCAE (FlowCapsules + SCAE object capsules)"
    tables = (2,)
    amodal = True
    uses_ground_truth: tuple[str, ...] = ()
    clip_frames = 2
    standardise_features = False  # SCAE's protocol clusters raw presences in [0, 1]
    budgets = FLOW_BUDGETS

    def _flowcaps_checkpoint(self, spec: TrainSpec, cfg) -> Path:
        """The FlowCapsules checkpoint this run builds on; on smoke, a tiny one trained here
        by FlowCapsules' own smoke profile (no committed checkpoint is 32 px)."""
        if spec.profile != "smoke":
            return Path(cfg.parts.checkpoint)
        from benchmark.registry import get_method
        flow_spec = dataclasses.replace(spec, run_dir=spec.run_dir / "flowcaps")
        done = flow_spec.run_dir / "model.pt"
        return done if done.is_file() else get_method("flowcaps").train(flow_spec)

    def _config(self, spec: TrainSpec, fill: bool):
        """The run's config; with `fill`, the parts' checkpoint, sha256 and sizes set from the
        FlowCapsules checkpoint (trained first on smoke)."""
        cfg = _profile("flowscae", spec)
        if spec.profile == "smoke":
            cfg = cfg.replace(parts={"checkpoint": str(spec.run_dir / "flowcaps" / "model.pt")})
        if not fill:
            return cfg
        path = self._flowcaps_checkpoint(spec, cfg)
        if not path.is_file():
            raise BenchmarkError(f"FlowSCAE builds on the FlowCapsules checkpoint {path}, which "
                                 f"does not exist")
        import flowcaps
        from baselines.scae.checkpoint import sha256
        with one_line(flowcaps.FlowcapsError, "FlowSCAE's parts"):
            m = flowcaps.load(path).config
        if m.image_size != spec.image_size:
            raise BenchmarkError(f"{path} is a {m.image_size} px model; the data is "
                                 f"{spec.image_size} px")
        return cfg.replace(parts={"checkpoint": str(path), "sha256": sha256(path),
                                  "n_parts": m.num_capsules, "n_features": m.shape_dim + 1})

    def config(self, spec: TrainSpec) -> dict[str, Any]:
        # Before a smoke run its FlowCapsules model does not exist yet: sizes are filled later.
        fill = spec.profile != "smoke" or (spec.run_dir / "flowcaps" / "model.pt").is_file()
        return dataclasses.asdict(self._config(spec, fill))

    def train(self, spec: TrainSpec) -> Path:
        import flowcaps
        import torch
        import trainloop
        from baselines.scae import ScaeError, train_flowscae
        from baselines.scae.data import load_images
        from baselines.scae.trainer import resolve_device
        cfg = self._config(spec, fill=True)
        with one_line((ScaeError, flowcaps.FlowcapsError), "flowscae training"):
            device = resolve_device(cfg.loop.device)
            flow = flowcaps.load(cfg.parts.checkpoint, device=device)
            images = load_images(spec.data_root, "train")  # (N, H, W, 3)
            parts = np.concatenate([
                to_numpy(flowcaps_parts(flow, torch.from_numpy(images[i:i + ENCODE_BATCH]).to(device)
                                   .permute(0, 3, 1, 2).float() / 255.0,
                                   cfg.parts.presence_area))
                for i in range(0, len(images), ENCODE_BATCH)])  # (N, K, 7 + F)
            with trainloop.errors_as(ScaeError):
                meta = trainloop.data_meta(spec.data_root)
            return Path(train_flowscae(cfg, parts, meta=meta))

    def load(self, checkpoint: Path) -> LoadedModel:
        ocae, cfg, meta = _read(checkpoint, "flowscae")
        import flowcaps
        from baselines.scae.checkpoint import sha256
        path = Path(cfg.parts.checkpoint)
        if not path.is_file():
            raise BenchmarkError(f"{checkpoint} builds on the FlowCapsules checkpoint {path}, "
                                 f"which does not exist here")
        if sha256(path) != cfg.parts.sha256:
            raise BenchmarkError(f"{path} is not the FlowCapsules checkpoint {checkpoint} was "
                                 f"trained on (sha256 differs)")
        device = next(ocae.parameters()).device
        with one_line(flowcaps.FlowcapsError, "FlowSCAE's parts"):
            flow = flowcaps.load(path, device=device)
        config = dataclasses.asdict(cfg)
        return LoadedModel(model=FlowSCAEModel(flow=flow, ocae=ocae), config=config, axes=Axes(),
                           image_size=flow.config.image_size,
                           trained_with={"config": config, "meta": meta})

    def predict(self, model: FlowSCAEModel, img0: np.ndarray, img1: np.ndarray, *,
                gt_flow: np.ndarray | None = None) -> Prediction:
        """Parts of img0 from FlowCapsules; its object capsules' presences as features."""
        import torch
        from flowcaps import geometry
        b, _, h, w = img0.shape
        dev = next(model.ocae.parameters()).device
        x = torch.from_numpy(img0).to(dev)  # (B, 3, H, W)
        with torch.inference_mode():
            shape, pose, depth = model.flow.encode(x)  # (B, K, C-5), (B, K, 4), (B, K)
            u = geometry.pixel_centres(h, w, dev).expand(b, -1, -1)  # (B, P, 2)
            pm = model.flow.masks_at(shape, pose, depth, u)  # (B, K, P)
            k = pm.masks.shape[1]
            parts = flowcaps_parts(model.flow, x, model.ocae.cfg.parts.presence_area)
            feats = model.ocae.infer(parts).prior  # (B, K_obj)
        return Prediction(masks=to_numpy(pm.masks.view(b, k, h, w)),
                          visible=to_numpy(pm.visible.view(b, k, h, w)), flow=None,
                          features=to_numpy(feats))

    def embed(self, model: FlowSCAEModel, img0: np.ndarray, *,
              gt_flow: np.ndarray | None = None) -> np.ndarray:
        import torch
        dev = next(model.ocae.parameters()).device
        x = torch.from_numpy(img0).to(dev)
        with torch.inference_mode():
            parts = flowcaps_parts(model.flow, x, model.ocae.cfg.parts.presence_area)
            return to_numpy(model.ocae.infer(parts).prior)  # (B, K_obj)

    def bench_subjects(self, profile: str, settings: tuple[str, ...]) -> tuple[Subject, None]:
        """The OCAE's step on given parts; making the parts (FlowCapsules' encoder, once per
        image before training) is not in it. No settings."""
        import torch
        from baselines.scae import profile as scae_profile
        from flowcaps import PROFILES
        m = PROFILES[profile]().model  # the parts' sizes, as from a checkpoint of that profile
        cfg = scae_profile("flowscae", profile).replace(
            parts={"n_parts": m.num_capsules, "n_features": m.shape_dim + 1})
        p = cfg.parts
        gen = torch.Generator().manual_seed(0)
        parts = torch.rand(cfg.loop.batch_size, p.n_parts, 7 + p.n_features, generator=gen)
        return _subject("flowscae", cfg, parts)  # (B, M, 7 + F)

    def loop_case(self) -> LoopCase:
        # part capsules: pose (6), presence (1), features (2)
        return _loop_case("flowscae", lambda rng: rng.normal(0, 0.5, (LOOP_ROWS, 4, 7 + 2))
                          .astype(np.float32))
