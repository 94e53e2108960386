"""FlowCapsules behind the benchmark protocol.

Letters: B batch, K capsules, C capsule size (|s| = C - 5), H = W image side.

Masks: Lambda_k, each capsule's amodal mask, in [0, 1]. Visible: Lambda+_k, the layering's share
of each pixel (the front-to-back composite, or the softmax over capsules and the static
background's entry), in [0, 1]; the metrics threshold each at 0.5 as given.

Features for clustering: for each image, the concatenation over the K capsules (in
capsule order) of shape code s_k (C - 5), pose theta_k (tx, ty, angle, scale; 4) and
depth d_k (1): K * C numbers. The clustering protocol standardises them.

flowcaps and torch are imported inside the functions so that `flowbench table` and
`flowbench list` start without loading torch.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmark.bench import Subject, image_side, synthetic_pairs
from benchmark.errors import BenchmarkError
from benchmark.methods import flowcaps_diagnose
from benchmark.methods.glue import checkpoint_file, eval_device, one_line, to_numpy
from benchmark.registry import (LOOP_BATCH, LOOP_ROWS, Axes, LoadedModel, LoopCase, Prediction,
                                TrainSpec, register)


@register
class FlowCapsulesMethod:
    name = "flowcaps"
    title = "FlowCapsules"
    # One seed, data and evaluation included (the records' wall_s say what each part took).
    budgets = {
        "smoke": "seconds",
        "quick": "512k training pairs: about 45-70 minutes on a 2-core CPU (200-300 pairs/s "
                 "with AVX-512, 140 without; geo+ also makes Geo's quick data, a minute)",
        "long": "2.4M training pairs: about 2.5-3 hours on a 2-core CPU with AVX-512",
        "gpu": "1.47M training pairs: about 8-9 minutes on one H100",
        "paper": "150 epochs over 100k pairs: about 14 hours on one H100 (an estimate, "
                 "scripts/paper_gpu.sh)",
    }
    uses_ground_truth = ()
    amodal = True
    tables = (1, 2)
    clip_frames = 2
    # flowcaps.profiles.MIX_WITH, spelt out so that `flowbench list` need not import torch
    trains_with = {"geo+": ("geo",)}
    commands = (flowcaps_diagnose.command,)  # `flowbench diagnose`: its probes
    multi_gpu = True  # flowcaps.launch: one torchrun rank per visible GPU, the batch split

    def _train_config(self, spec: TrainSpec):
        """The profile's config for the dataset (flowcaps.profiles.for_data, as `flowcaps
        train` builds it), then the spec's seed, device and Table 3 axes."""
        import flowcaps
        from flowcaps.profiles import MIX_WITH, for_data
        if spec.profile not in flowcaps.PROFILES:
            raise BenchmarkError(f"flowcaps has no profile {spec.profile!r}")
        model: dict[str, Any] = {}
        v = spec.variant
        if v.num_capsules is not None:
            model["num_capsules"] = v.num_capsules
        if v.shape_dim is not None:
            model["capsule_dim"] = v.shape_dim + 5  # C = |s| + 4 pose numbers + 1 depth
        if v.decoder_depth is not None:
            model["dec_depth"] = v.decoder_depth
        if v.depth_ordering is not None:
            model["depth_ordering"] = v.depth_ordering
        mix_with = MIX_WITH.get(spec.dataset)
        mix = spec.extra_data.get(mix_with) if mix_with else None
        with one_line(flowcaps.FlowcapsError, "flowcaps config"):
            cfg = for_data(spec.profile, spec.dataset, out=str(spec.run_dir),
                           mix_data=None if mix is None else str(mix), image_size=spec.image_size)
            cfg = cfg.replace(loop={"seed": spec.seed, "device": spec.device}, model=model)
            if mix_with and mix is None:
                # The runner passes the mix data whenever it trains; without it (a given
                # checkpoint's evaluation, the ablation grid's axes) the config is only read.
                cfg.model.validate()
            else:
                cfg.validate()
        return cfg

    def config(self, spec: TrainSpec) -> dict[str, Any]:
        return dataclasses.asdict(self._train_config(spec))

    def axes(self, spec: TrainSpec) -> Axes:
        """Table 3's axes that a spec trains with (its variant over the profile's defaults):
        `flowbench ablate` asks for only the axes that differ from these."""
        m = self._train_config(spec).model
        return Axes(num_capsules=m.num_capsules, shape_dim=m.shape_dim,
                    decoder_depth=m.dec_depth, depth_ordering=m.depth_ordering)

    def train(self, spec: TrainSpec) -> Path:
        import flowcaps
        with one_line(flowcaps.FlowcapsError, "flowcaps training"):
            return Path(flowcaps.train(self._train_config(spec), spec.data_root))

    def load(self, checkpoint: Path) -> LoadedModel:
        import flowcaps
        from flowcaps.checkpoint import config_of, meta_of, read
        with one_line(flowcaps.FlowcapsError, f"cannot load {checkpoint} as a flowcaps checkpoint"):
            model = flowcaps.load(checkpoint_file(checkpoint), device=eval_device())
            blob = read(checkpoint)  # its config in today's form, whatever form it was stored in
            trained_with = {"config": dataclasses.asdict(config_of(blob)), "meta": meta_of(blob)}
        model.eval()
        m = model.config
        axes = Axes(num_capsules=m.num_capsules, shape_dim=m.shape_dim,
                    decoder_depth=m.dec_depth, depth_ordering=m.depth_ordering)
        return LoadedModel(model=model, config=dataclasses.asdict(m), axes=axes,
                           image_size=m.image_size, trained_with=trained_with)

    def predict(self, model: Any, img0: np.ndarray, img1: np.ndarray, *,
                gt_flow: np.ndarray | None = None) -> Prediction:
        """`model.parse(img0)` and `model.flow(img0, img1)` from one decoder pass (gt_flow is
        not used: FlowCapsules sees only the images).

        The decoder dominates inference, and both public calls decode the masks of img0
        on the full grid; composing the model's steps once halves evaluation time. The
        contract test checks the result against `parse` and `flow`.
        """
        return _predict(model, img0, img1)

    def embed(self, model: Any, img0: np.ndarray, *,
              gt_flow: np.ndarray | None = None) -> np.ndarray:
        import torch
        dev = next(model.parameters()).device
        with torch.inference_mode():
            shape, pose, depth = model.encode(torch.from_numpy(img0).to(dev))  # (B, K, *)
            feats = torch.cat([shape, pose, depth[..., None]], -1)  # (B, K, C)
        return to_numpy(feats.flatten(1))  # (B, K * C)

    def bench_subjects(self, profile: str, settings: tuple[str, ...]) -> tuple[Subject, Subject]:
        """One rank of the profile (its batch and threads per rank), in float32 and eager, then
        as the profile trains it (its compile and bf16); `settings` as `flowcaps train --set`
        takes them."""
        from flowcaps.cli import parse_set
        from flowcaps.errors import FlowcapsError
        with one_line(FlowcapsError, "flowcaps bench"):
            changes = parse_set(settings)
            return _bench_subject(profile, changes, False), _bench_subject(profile, changes, True)

    def loop_case(self) -> LoopCase:
        import flowcaps
        from flowcaps import trainer

        def config(out: Path, steps: int):
            model = flowcaps.ModelConfig(image_size=32, num_capsules=3, capsule_dim=8,
                                         enc_channels=(4, 8), enc_hidden=16, dec_hidden=8,
                                         dec_depth=2)
            # FlowCapsules' budget is in epochs, of LOOP_ROWS / LOOP_BATCH steps each
            return flowcaps.TrainConfig().replace(model=model, out=str(out),
                                        epochs=steps * LOOP_BATCH // LOOP_ROWS,
                                        batch_size=LOOP_BATCH, lr=1e-3, points=64,
                                        smooth_points=8, device="cpu", threads=1, cpu_ranks=1,
                                        compile=False, log_every=1, checkpoint_minutes=0.0)

        def fit(cfg, meta=None) -> Path:
            rng = np.random.default_rng(0)
            pairs = rng.integers(0, 256, (LOOP_ROWS, 2, 32, 32, 3), dtype=np.uint8)
            return trainer.fit(cfg, pairs, progress=False, meta=meta)

        return LoopCase(trainer.FlowcapsTask, config, fit, flowcaps.FlowcapsError,
                        lambda c: c.replace(lr=5e-3), "lr")


def _bench_subject(profile: str, changes: dict[str, Any], as_trained: bool) -> Subject:
    """FlowCapsules' step on one rank of `profile` with `changes` (parsed `--set` items)."""
    import torch
    from flowcaps import PROFILES, memory
    from flowcaps.launch import per_rank_config, ranks_for
    from flowcaps.trainer import FlowcapsTask
    model = {"image_size": image_side(profile), **changes.get("model", {})}
    cfg = PROFILES[profile]().replace(**{**changes, "model": model})
    ranks = ranks_for(cfg, "cpu")
    cfg = per_rank_config(cfg, ranks) if ranks > 1 else cfg
    if not as_trained:
        cfg = cfg.replace(bf16=False, compile=False)
    cfg.validate()
    memory.check(cfg)
    pairs = torch.from_numpy(synthetic_pairs(cfg.loop.batch_size, cfg.model.image_size))
    return Subject("flowcaps", FlowcapsTask(cfg), (pairs,), cfg.loop.threads or 1,
                   cfg.loop.grad_clip or None, processes=ranks)


@register
class FlowCapsulesRefinedMethod(FlowCapsulesMethod):
    """FlowCapsules with test-time pose refinement (flowcaps.refine): the same training and
    checkpoints as "flowcaps"; only inference differs.

    Frame 0's poses are refined, so its masks and visibility (the IoU and ARI metrics) come from
    refined poses. Flow and the clustering features stay the encoder's, as `embed`'s do for the
    train images (docs/results/flowcaps.md, "Test-time pose refinement", says why).
    """

    name = "flowcaps-refine"
    title = "FlowCapsules + pose refinement"
    # The same training; the refinement makes evaluating 10k test pairs slow on a CPU.
    budgets = {
        "smoke": "seconds",
        "quick": "512k training pairs, as flowcaps; evaluating adds about 12 minutes on Geo, "
                 "50 on Geo+ (2-core CPU)",
        "long": "2.4M training pairs, as flowcaps; evaluating adds about 12 minutes on Geo, "
                "50 on Geo+ (2-core CPU)",
        "gpu": "1.47M training pairs: about 10 minutes on one H100",
        "paper": "many hours on a GPU",
    }
    # Its clustering features are the encoder's, as for flowcaps: Table 2 would repeat that row.
    tables = (1,)
    # It trains as flowcaps does: the bench and the loop's checks have that row already.
    bench_subjects = None
    loop_case = None

    def __init__(self, refine=None):
        self._refine = refine  # a flowcaps RefineConfig; None: its defaults, made on first use

    @property
    def refine(self):
        # Made here, not at registration: importing flowcaps imports torch, and `flowbench
        # list` and `table` start without it.
        if self._refine is None:
            from flowcaps.config import RefineConfig
            self._refine = RefineConfig()
        return self._refine

    def load(self, checkpoint: Path) -> LoadedModel:
        loaded = super().load(checkpoint)
        # Refine by the appearance term the model was trained with: where its background layer
        # was the pair's other frame ("still", as on Geo+'s photographs), so is it here;
        # checkpoints from before that setting used a flat colour.
        trained = (loaded.trained_with or {}).get("config", {})
        still = trained.get("appearance_background") == "still"
        # the record keeps how inference ran beside the model's own configuration
        refine = {**dataclasses.asdict(self.refine), "background": "still" if still else "colour"}
        return dataclasses.replace(loaded, model=Refining(loaded.model, still),
                                   config={**loaded.config, "refine": refine})

    def predict(self, model: Refining, img0: np.ndarray, img1: np.ndarray, *,
                gt_flow: np.ndarray | None = None) -> Prediction:
        return _predict(model.net, img0, img1, self.refine, model.still)

    def embed(self, model: Refining, img0: np.ndarray, *,
              gt_flow: np.ndarray | None = None) -> np.ndarray:
        return super().embed(model.net, img0)


@dataclass(frozen=True)
class Refining:
    """What flowcaps-refine loads: the FlowCapsules model and whether its refinement takes the
    pair's other frame as the background layer."""

    net: Any
    still: bool


def _predict(net: Any, img0: np.ndarray, img1: np.ndarray, refine: Any = None,
             still: bool = False) -> Prediction:
    """Both frames encoded in one batch, frame 0 decoded on the full grid in one pass.

    With `refine` (a RefineConfig) frame 0's poses are refined (against img1 as the background
    layer where `still`) and decoded in that same pass beside the encoder's: the masks come
    from the refined poses, the flow and the features from the encoder's.
    """
    import torch
    from flowcaps import geometry
    from flowcaps.model import PointMasks
    from flowcaps.refine import refine_poses
    b, _, h, w = img0.shape
    dev = next(net.parameters()).device
    with torch.no_grad():  # not inference_mode: the refinement takes gradients in the poses
        x = torch.from_numpy(np.concatenate([img0, img1])).to(dev)  # (2B, 3, H, W)
        shape, pose, depth = net.encode(x)  # (2B, K, C-5), (2B, K, 4), (2B, K)
    shape, pose0, pose1, depth = shape[:b], pose[:b], pose[b:], depth[:b]
    u = geometry.pixel_centres(h, w, dev).expand(b, -1, -1)  # (B, P, 2)
    poses, n = pose0, 1  # the poses decoded, n copies of frame 0 in a row
    if refine is not None:
        moved = refine_poses(net, x[:b], shape, pose0, depth, refine, x[b:] if still else None)
        poses, n = torch.cat([pose0, moved]), 2  # (2B, K, 4)
    with torch.no_grad():
        pm = net.masks_at(shape.repeat(n, 1, 1), poses, depth.repeat(n, 1),
                          u.repeat(n, 1, 1))  # (nB, K, P)
        encoders = PointMasks(v=pm.v[:b], masks=pm.masks[:b], visible=pm.visible[:b])
        phi = geometry.frame_to_pixels(net.flow_at(encoders, pose1, u), h, w)  # (B, P, 2)
        feats = torch.cat([shape, pose0, depth[:, :, None]], -1)  # (B, K, C)
    k = shape.shape[1]
    return Prediction(masks=to_numpy(pm.masks[-b:].view(b, k, h, w)),
                      visible=to_numpy(pm.visible[-b:].view(b, k, h, w)),
                      flow=to_numpy(phi.transpose(1, 2).reshape(b, 2, h, w)),
                      features=to_numpy(feats.flatten(1)))
