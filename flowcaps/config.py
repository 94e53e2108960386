"""Typed configs of the model and the trainer, their JSON round trip, and the named profiles.

Both configs are frozen dataclasses; a checkpoint stores `TrainConfig.to_json()` so `load`
rebuilds the exact model, and a resumed run can check that nothing changed.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Callable

from flowcaps.errors import FlowcapsError
from flowcaps.fields import check_types

MASK_READINGS = ("prob", "logit")
LAYERINGS = ("softmax", "over")
BACKGROUNDS = ("uniform", "static")
DEVICES = ("cpu", "cuda", "auto")
SCHEDULES = ("constant", "cosine")
CENTER_FORMS = ("centroid", "spread", "spread_image")
OVERLAP_RAMP = 0.1  # fraction of a run over which the overlap term ramps in (see overlap_start)


@dataclass(frozen=True)
class ModelConfig:
    """The network. Paper Geo settings: K=8, C=32 (|s| = C - 5 = 27)."""

    image_size: int = 64
    num_capsules: int = 8  # K
    capsule_dim: int = 32  # C = |s| + 4 pose numbers + 1 depth
    enc_channels: tuple[int, ...] = (32, 32, 64, 64)  # one 3x3 conv + ReLU + 2x2 avg-pool each
    enc_hidden: int = 256  # the tanh fully connected layer
    coord_channels: bool = True  # append (x, y) input channels; eases pose regression
    # "fc": translation from the capsule FC layer (the paper); "softargmax": the expected
    # position of a per-capsule heat map over the last-but-one conv block (see model.Encoder).
    translation_head: str = "softargmax"
    # The conv block (before its pooling) whose features feed the heat maps; negative counts
    # from the end (clamped to the first). -2 is 16x16 cells at 64 px with a 15 px receptive field, -1 is 8x8 with 31.
    heat_block: int = -2
    # With the "softargmax" head: also read each capsule's numbers from the heat block's
    # features pooled under its own heat map (a shared MLP, added to the FC head's output), so
    # a capsule's shape, angle, scale and depth come from the object it sits on, and the FC
    # need not know which object each capsule picked.
    pooled_params: bool = False
    # With the "softargmax" head: add a learned offset, at most this far in each image-frame
    # coordinate, to the heat map's centre; the FC head's two translation numbers (unused by that
    # head otherwise) give it through tanh. 0 = off. The heat map's centre is that of the visible
    # part: in the quick records circles more than 20% hidden scored .850, the rest .948 (seed 0,
    # 1000 test pairs), half their misses in the hidden part. Measured at 0.15 against the quick
    # record of seed 2, same run seed and data order (23 minutes, 1000 test pairs;
    # results/quick-exp-2026-11-26e): .883 fixed (circle .791), record .913 (circle .852);
    # per image .919 against .916. The circles went to a second capsule now and then and their
    # hidden parts were missed no less, so it stays off.
    heat_offset: float = 0.0
    dec_hidden: int = 32
    dec_depth: int = 3  # SELU layers of the implicit decoder before its output (ablation: 2 or 6)
    split_first_layer: bool = True  # W [s; v] as W_s s + W_v v (same weights; a speed lever only)
    # "image": s_k comes from the encoder (the paper). "capsule": each capsule has one learned
    # shape code, the same in every image (Geo's shapes never deform).
    shape_code: str = "image"
    # "image": d_k from the encoder (the paper). "capsule": one learned depth per capsule, a
    # fixed front-to-back order (Geo draws its slots in a fixed order).
    depth_code: str = "image"
    depth_ordering: bool = True  # False: plain softmax of Lambda_k (ablation), whatever the layering
    # How depth turns amodal masks into visibility. "softmax" (the paper): softmax_k of
    # d_k * Lambda_k (with "static", d_k (Lambda_k - 1/2) against the background's 0).
    # "over": front-to-back compositing, Lambda+_k = Lambda_k * prod_j (1 - f_jk Lambda_j) with
    # f_jk = sigmoid(d_j - d_k) the chance that j is in front of k; the rest is background.
    # With "softmax" a capsule layered over another (a shape over a capsule that holds the
    # background) only wins a pixel where d_k (Lambda_k - 1/2) beats the other's score, so the
    # losses put its visible edge at Lambda_k ~ 0.7, not 0.5, and the thresholded amodal mask
    # comes out about half a pixel too big all round (measured: the circles of the gpu records,
    # whose IoU rose from .88 to .94 at a 0.7 threshold). With "over" what lies behind a capsule
    # does not change its visibility, so its edge sits at Lambda_k = 1/2 against anything.
    # Measured, quick profile seed 0, 23 minutes, 1000 test pairs (results/quick-exp-2026-11-26d):
    # false positives per triangle mask 17.6 -> 1.8, per square 12.3 -> 2.3 (now drawn with
    # corners), per-image IoU .827 -> .905; but the circles went to five capsules, so the fixed
    # assignment scored .786 (record .825). Seed 1 kept one capsule per class: .923 fixed on
    # the 10k test pairs (record .847). Seed 2 kept none: .499 (per image .839). Mean of the
    # three .736 against .829 for the softmax records: sharper edges, less stable identities.
    # On a GPU, 3.25 minutes, three seeds: per image .879-.885, fixed .723-.838
    # (results/gpu-sweep-2026-11-26c). With per-capsule shape codes the identities held
    # (see quick_profile): on in the quick profile.
    layering: str = "softmax"
    # "prob": sigmoid(D) is Lambda_k, visibility softmax_k(d_k * Lambda_k) (the paper's equations).
    # "logit": Lambda_k = sigmoid(D) too, but visibility softmax_k(D_k + d_k) on the raw logits.
    mask_reading: str = "prob"
    # Pixels no capsule claims. "uniform" (the paper): softmax_k over capsules only, so uncovered
    # pixels average all K capsule flows. "static": an extra zero-flow background entry with score
    # 0 and capsule scores d_k (Lambda_k - 1/2) with d_k > 0, so a capsule claims a pixel over the
    # background exactly where Lambda_k > 1/2. Measured here: with "uniform" every mask collapsed
    # (the K-capsule average is an easy global-affine flow), so Geo uses "static".
    background: str = "static"
    mask_prior: float = 4.0  # gain of a fixed disc prior g * (1 - |v|^2) added to D's logit; 0 = off
    trans_bound: float = 1.5  # |t| <= bound via tanh, in the [-1, 1] image frame
    scale_init: float = 0.25  # canonical unit radius -> image radius (shapes span 0.2-0.3 L)
    scale_min: float = 0.1  # a floor near the smallest shape keeps capsules from shrinking away
    # Depth starts here for every capsule: with d ~ 0 the softmax of d * Lambda is uniform
    # whatever the masks are, so the render loss gives them no gradient and they collapse.
    depth_init: float = 10.0
    # With the "static" background, d_k = depth_min + softplus(.): a floor keeps the softmax sharp.
    # Measured here: with small d every capsule hedges with a soft, image-wide claim (a global
    # affine blend of all capsule flows) instead of owning a shape.
    depth_min: float = 8.0
    init_ring: float = 0.4  # capsules start on a ring of this radius, to break their symmetry

    @property
    def shape_dim(self) -> int:
        return self.capsule_dim - 5

    def validate(self) -> None:
        if self.capsule_dim < 6:
            raise FlowcapsError(f"capsule_dim must be >= 6 (|s| = C - 5 >= 1), got {self.capsule_dim}")
        if self.num_capsules < 1:
            raise FlowcapsError(f"num_capsules must be >= 1, got {self.num_capsules}")
        if self.layering not in LAYERINGS:
            raise FlowcapsError(f"layering must be one of {LAYERINGS}, got {self.layering!r}")
        if self.layering == "over" and self.background != "static":
            raise FlowcapsError("layering 'over' needs the static background (what no capsule "
                                "covers is background)")
        if self.mask_reading not in MASK_READINGS:
            raise FlowcapsError(f"mask_reading must be one of {MASK_READINGS}, got {self.mask_reading!r}")
        for name in ("shape_code", "depth_code"):
            if getattr(self, name) not in ("image", "capsule"):
                raise FlowcapsError(f"{name} must be image or capsule, got {getattr(self, name)!r}")
        if self.translation_head not in ("fc", "softargmax", "segment"):
            raise FlowcapsError(f"translation_head must be fc, softargmax or segment, got {self.translation_head!r}")
        if self.background not in BACKGROUNDS:
            raise FlowcapsError(f"background must be one of {BACKGROUNDS}, got {self.background!r}")
        if self.background == "static" and self.depth_init <= self.depth_min:
            raise FlowcapsError(f"depth_init ({self.depth_init}) must exceed depth_min ({self.depth_min})")
        if self.pooled_params and self.translation_head != "softargmax":
            raise FlowcapsError("pooled_params needs translation_head softargmax")
        if self.heat_offset < 0 or (self.heat_offset and self.translation_head != "softargmax"):
            raise FlowcapsError(f"heat_offset must be >= 0 and needs translation_head softargmax, "
                                f"got {self.heat_offset} with {self.translation_head!r}")
        if self.dec_depth < 1:
            raise FlowcapsError(f"dec_depth must be >= 1, got {self.dec_depth}")
        if self.heat_block >= len(self.enc_channels):
            raise FlowcapsError(f"heat_block {self.heat_block} is past the "
                                f"{len(self.enc_channels)} encoder blocks")
        pools = len(self.enc_channels)
        if self.image_size % (2 ** pools) or self.image_size < 2 ** pools:
            raise FlowcapsError(
                f"image_size {self.image_size} must be a multiple of {2 ** pools} "
                f"({pools} pooling stages)")


@dataclass(frozen=True)
class RefineConfig:
    """Test-time pose refinement (flowcaps.refine), an extension: the paper parses in one pass.

    Each image's K poses, started from the encoder's, are fitted to that image alone by the
    layered flat-colour appearance loss (losses.appearance_loss) with Adam and a cosine step
    size; shape codes, depths and the networks stay fixed, and no label is read. Only pixels
    within `band` px of an intensity change enter the loss: elsewhere every mask is saturated
    and gives no gradient to the poses.
    """

    steps: int = 60  # 0 = off: the encoder's poses
    lr: float = 3e-3  # Adam's step on the pose numbers (image frame [-1, 1], radians, scale)
    band: int = 2

    def validate(self) -> None:
        if self.steps < 0 or self.lr <= 0 or self.band < 0:
            raise FlowcapsError(f"refine needs steps >= 0, lr > 0 and band >= 0, got "
                                f"steps={self.steps}, lr={self.lr}, band={self.band}")


@dataclass(frozen=True)
class TrainConfig:
    """A training run: the model, the run folder and every optimisation choice."""

    model: ModelConfig = field(default_factory=ModelConfig)
    out: str = "runs/flowcaps"
    seed: int = 0
    device: str = "auto"
    epochs: int = 150
    batch_size: int = 64
    lr: float = 1e-4
    lr_schedule: str = "constant"
    warmup_steps: int = 0
    max_minutes: float | None = None  # stop gracefully (and checkpoint) after this much training
    max_pairs: int | None = None  # use only the first N training pairs
    points: int = 256  # pixel centres sampled per image for the losses; 0 = the full grid
    smooth_points: int = 32  # of those, how many also get +1 px neighbours for L_smooth
    # Importance sampling of the points: a mix of uniform and an edge density (|grad I| of both
    # frames blurred by edge_sigma px), each point weighted by 1 / (H W q): still unbiased.
    edge_sampling: float = 0.8
    edge_sigma: float = 3.0
    blur_sigmas: tuple[float, ...] = (0.0, 1.5, 3.0)  # render-loss pyramid; (0.0,) = paper
    # Fade the blurred levels' weight linearly to nothing over this fraction of the run; 0 = keep
    # them. A blurred shape's halo moves with it, so late in training the blurred levels reward
    # masks that reach past the shape's edge.
    blur_fade: float = 0.0
    both_directions: bool = True  # also predict I' from I (swap the frames)
    w_smooth: float = 1e-4
    w_center: float = 0.1  # the paper's 1e-2 left masks ~2x too big here (with "spread_image")
    # "centroid": |E_u[Lambda v] / E_u[Lambda]|^2, the mask's centre of mass at the canonical origin
    # (fixes the pose/decoder translation ambiguity without penalising size).
    # "spread": E_u[Lambda |v|^2], the mask-weighted squared distance, which also penalises the
    # mask's image area and, measured here, collapses every mask to nothing early in training,
    # or lets one capsule of huge scale cover the image (|v| is small when the scale is large).
    # "spread_image": E_u[Lambda |u - t|^2] = s^2 E_u[Lambda |v|^2], the same distance measured in
    # the image frame, which a large scale cannot shrink.
    center_form: str = "spread_image"
    # w_center ramps up linearly from 0 over this fraction of the run: an early size penalty
    # shrinks capsules to nothing before they find a shape (measured), and they never recover.
    center_warmup: float = 0.3
    # Occlusion-aware render loss (losses.occlusion_keep): compare a point only where its layer
    # is still visible at its destination; off = the paper's loss. Without it the masks grew
    # about half a pixel all round (see quick_profile); the gpu profile turns it on.
    occlusion_aware: bool = False
    # Flat-colour layered appearance term (losses.appearance_loss); 0 = off (the paper).
    w_appearance: float = 0.0
    # Weight of losses.overlap_loss: two capsules covering the same pixels while moving alike
    # (duplicates of one shape); 0 = off (the paper). overlap_tau: its flow tolerance in pixels.
    # Measured in the quick profile with the occlusion-aware loss (23 minutes, seed 1, 1000 test
    # pairs): at 0.05 from the start, IoU .416 (per image .706) and no capsule took a class: the
    # capsules first own regions of the image, and taking a class over from a neighbour means
    # passing through overlap, which this term forbids (results/quick-exp-2026-11-26c).
    w_overlap: float = 0.0
    overlap_tau: float = 1.0
    # The overlap term stays off for this fraction of the run, then ramps to w_overlap over the
    # next OVERLAP_RAMP of it: capsules first settle on shapes, then each shape is left to one
    # of them. Measured (quick profile, seed 0, 23 minutes, 1000 test pairs;
    # results/quick-exp-2026-11-26d): w_overlap 0.05 from 0.4 of the run scored .524 (per image
    # .731; the record without it .825). The triangles reached .922, but each circle and square
    # was cut in two: the two capsules stacked on it shared it out, half each, instead of one
    # leaving (circles .389, squares .334). Those capsules read their shape codes from the
    # image. With one learned code per capsule (shape_code "capsule") a capsule cannot take half
    # a shape: a 14-minute fine-tune of the long checkpoint at 0.05 removed its second circle
    # capsule (circle .915 -> .941, visible IoU .599 -> .907 on the 10k test pairs;
    # results/overlap-2026-11-27).
    overlap_start: float = 0.0
    # Weight of losses.consistency_loss (each capsule's canonical mask the same in every image,
    # ramped in with w_center); 0 = off (the paper). Measured in quick runs (see quick_profile):
    # at 3, .880 for one seed and .459 for another; at 0.3 the term stayed near 1e-3 against a
    # render loss near 3e-3 and the capsules stayed generic (.569).
    w_consistency: float = 0.0
    # Weight of losses.segment_loss, scoring the "segment" translation head's coarse ownership
    # like the masks; 0 = off.
    w_segment: float = 0.0
    # Fade the translation head's spatial prior to nothing over this fraction of the run; 0 =
    # keep it. The prior breaks the capsules' symmetry at the start, but a capsule that keeps
    # it owns a region of the image rather than a kind of shape.
    prior_anneal: float = 0.0
    # Encoder inputs only: each frame's colour channels in an independent random order (the
    # losses keep the true frames). Capsule k of I must be capsule k of I', so a capsule cannot
    # be "the red shape". Geo shuffles colours among shapes, and the quick run's capsules were
    # keyed by colour (each matched one dominant channel, IoU ~.6-.7 there, ~.2 elsewhere),
    # which holds the fixed-assignment IoU down. In 10-minute runs the shuffle removed the
    # colour keys but no capsule took up a shape class instead (.397 against .452).
    colour_shuffle: bool = False
    grad_clip: float = 1.0  # 0 = off
    bf16: bool = False  # CPU/GPU bf16 autocast of the network
    compile: bool = False  # torch.compile the loss step
    threads: int = 0  # torch intra-op threads on CPU; 0 = the machine's cores / number of ranks
    # CPU processes `flowcaps.train` starts (torchrun, see flowcaps.launch); 0 = one per core.
    cpu_ranks: int = 1
    checkpoint_minutes: float = 2.0
    # Start from this checkpoint's weights (a fine-tune): the optimizer, the schedules and the
    # step count start afresh, and its model config must equal this run's. Everything the
    # schedules set starts again too, so a fine-tune of a trained model usually also sets
    # prior_anneal 0 (keep the faded prior as trained) and center_warmup 0. A resumed run reads
    # its own checkpoint instead. None = random weights from `seed`.
    init: str | None = None
    explode_factor: float = 50.0  # loss above this many times its running median -> stop
    log_every: int = 20  # steps between CSV rows

    def validate(self) -> None:
        self.model.validate()
        if self.device not in DEVICES:
            raise FlowcapsError(f"device must be one of {DEVICES}, got {self.device!r}")
        if self.lr_schedule not in SCHEDULES:
            raise FlowcapsError(f"lr_schedule must be one of {SCHEDULES}, got {self.lr_schedule!r}")
        if self.epochs < 1 or self.batch_size < 1 or self.lr <= 0:
            raise FlowcapsError("epochs and batch_size must be >= 1 and lr > 0")
        _check_run_limits(self)
        if self.center_form not in CENTER_FORMS:
            raise FlowcapsError(f"center_form must be one of {CENTER_FORMS}, got {self.center_form!r}")
        if self.cpu_ranks < 0:
            raise FlowcapsError(f"cpu_ranks must be >= 0 (0 = one per core), got {self.cpu_ranks}")
        if self.points < 0 or self.smooth_points < 0:
            raise FlowcapsError("points and smooth_points must be >= 0")
        if not self.blur_sigmas or any(s < 0 for s in self.blur_sigmas):
            raise FlowcapsError(f"blur_sigmas must be a non-empty list of sigmas >= 0, got {self.blur_sigmas}")
        if self.w_consistency < 0:
            raise FlowcapsError(f"w_consistency must be >= 0, got {self.w_consistency}")
        if self.w_overlap < 0 or self.overlap_tau <= 0:
            raise FlowcapsError(f"w_overlap must be >= 0 and overlap_tau > 0, got "
                                f"{self.w_overlap} and {self.overlap_tau}")
        if not 0 <= self.overlap_start < 1:
            raise FlowcapsError(f"overlap_start must be in [0, 1), got {self.overlap_start}")
        if self.blur_fade < 0 or (self.blur_fade > 0 and 0.0 not in self.blur_sigmas):
            raise FlowcapsError(f"blur_fade must be >= 0 and needs an unblurred level (0.0) in "
                                f"blur_sigmas, got {self.blur_fade} with {self.blur_sigmas}")

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "TrainConfig":
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as err:
            raise FlowcapsError(f"train config is not valid JSON: {err}") from None
        if not isinstance(raw, dict) or not isinstance(raw.get("model", {}), dict):
            raise FlowcapsError("train config must be a JSON object (with an object as model)")
        return cls.from_dict(raw)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> "TrainConfig":
        raw = dict(raw)
        model = _build(ModelConfig, raw.pop("model", {}))
        return _build(cls, {**raw, "model": model})

    def replace(self, **changes: Any) -> "TrainConfig":
        """A copy with some fields changed; `model` may be a dict of model-field changes."""
        changes = _tuples(changes)
        model = changes.pop("model", None)
        if isinstance(model, dict):
            try:
                model = dataclasses.replace(self.model, **check_types(ModelConfig, model))
            except TypeError as err:
                raise FlowcapsError(f"unknown model config field: {err}") from None
        if model is not None:
            changes["model"] = model
        try:
            return dataclasses.replace(self, **check_types(type(self), changes))
        except TypeError as err:
            raise FlowcapsError(f"unknown config field: {err}") from None


def _check_run_limits(cfg: TrainConfig) -> None:
    """The run's budget, data limit and bookkeeping: each must name something that can happen."""
    checks = [(cfg.max_minutes is None or cfg.max_minutes > 0,
               f"max_minutes must be > 0 (or null for none), got {cfg.max_minutes}"),
              (cfg.max_pairs is None or cfg.max_pairs >= 1,
               f"max_pairs must be >= 1 (or null for all), got {cfg.max_pairs}"),
              (cfg.seed >= 0, f"seed must be >= 0, got {cfg.seed}"),
              (cfg.warmup_steps >= 0, f"warmup_steps must be >= 0, got {cfg.warmup_steps}"),
              (cfg.threads >= 0, f"threads must be >= 0 (0 = auto), got {cfg.threads}"),
              (cfg.checkpoint_minutes >= 0,
               f"checkpoint_minutes must be >= 0, got {cfg.checkpoint_minutes}"),
              (cfg.log_every >= 1, f"log_every must be >= 1, got {cfg.log_every}")]
    for ok, message in checks:
        if not ok:
            raise FlowcapsError(message)


def _tuples(raw: dict[str, Any]) -> dict[str, Any]:
    # JSON and the CLI give lists; the dataclasses hold tuples so they stay hashable and frozen.
    return {k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()}


def _build(cls: type, raw: dict[str, Any]) -> Any:
    names = {f.name: f for f in dataclasses.fields(cls)}
    unknown = set(raw) - set(names)
    if unknown:
        raise FlowcapsError(f"unknown {cls.__name__} fields: {sorted(unknown)}")
    return cls(**check_types(cls, raw))


def quick_profile(out: str = "runs/flowcaps-quick") -> TrainConfig:
    """CPU profile: Geo 64 px inside a 30-minute budget (data, training and evaluation)."""
    # lr 3e-3 beat 1e-3 in 10-minute runs (IoU .349 vs .291); the cosine follows the time budget.
    # 10-minute runs, 1000 test pairs (one thread each, two runs sharing the cores): the
    # appearance term at weight 1 gave .410 and at 3 gave .419; with torch.compile (about twice
    # the steps) .420. Occlusion weighting (.392 with w_appearance 1) and the "segment" head
    # (.373; .386 with w_segment 1) did not pay then (occlusion weighting now does on a GPU).
    # Per-image matching scored far higher than the fixed assignment (.70 vs .42): the capsules
    # owned regions of the image (the ring prior, and position read from the coordinate
    # channels), not kinds of shape. Without coordinate channels and with the prior faded out
    # over the first half: .452 (per image .765). Per-capsule shape and depth codes on top: .339.
    # That profile, 23 minutes on 2 ranks (`flowbench run flowcaps`, 10k test pairs): .517,
    # per image .814. Its capsules were keyed by colour (see colour_shuffle), so two switches
    # followed: colour_shuffle and pooled_params. In 10-minute CPU runs they did not pay (.434),
    # but on a GPU (4 minutes, 1.6-2.2M pairs; results/gpu-sweep-2026-11-26) they lifted the
    # fixed-assignment IoU from .434 (this model without them) to .685 and .890 (two seeds);
    # either switch alone gave .470 and .589. This profile, 23 minutes on 2 ranks of a 2-core
    # AMD EPYC (`flowbench run flowcaps`): .825 fixed, .827 per image (452k pairs); seed 1 .847,
    # seed 2 .815.
    # With capsule identity solved, the errors were a dilation: circle and triangle masks ~0.5 px
    # too big all round (false positives within 1 px of the edge, no preferred direction, almost
    # no misses). A frame alone cannot tell which way its shapes will move, and the plain render
    # loss pays a mask for claiming the background that the shape covers in the other frame, so
    # the masks grew all round. The occlusion-aware loss removes that reward. On a GPU it lifted
    # both seeds (.685/.890 to .866/.908, see gpu_profile). In this 23-minute profile it did not
    # pay: one run reached .891 (`flowcaps train --profile quick`, 1000 test pairs), but both
    # `flowbench run` records with it split a shape class between two capsules (.779 and .761,
    # per image .876 and .832; results/quick-occlusion-2026-11-26).
    # Those splits were capsules that stayed generic: in the seed-0 record four capsules each
    # covered circles and squares about half the time, and which one a circle went to varied
    # from image to image. pooled_params lets any capsule draw whatever shape it sits on, and
    # the loss cannot tell capsules apart. The consistency term (w_consistency) asks each
    # capsule to draw the same canonical mask in every image. Seed 1 with the occlusion-aware
    # loss, 23 minutes, 1000 test pairs (results/quick-exp-2026-11-26c): .761 (the record
    # without the term), .569 with w_consistency 0.3 (too weak to matter), .880 with 3 (per
    # image .881: one capsule per class). But the `flowbench run` record of seed 0 with both
    # (10k test pairs) scored .459, per image .789: every capsule stayed generic. Seed 2 (1000
    # test pairs) .837, per image .838. Identities held in two runs of three, so both stay off.
    # The identities were the remaining failure: with pooled_params every capsule could draw
    # whatever shape it sat on, so the spare capsules stacked behind the shapes and took a class
    # in some images only. One learned shape code per capsule (model.shape_code "capsule"; Geo's
    # shapes only move, turn and scale) lets a capsule draw one kind of shape, so the render
    # loss rewards its heat map for finding that kind in every image; with the "over" layering
    # (sharper edges, see ModelConfig.layering) seed 2, 23 minutes, 1000 test pairs
    # (results/quick-exp-2026-11-26e): .922 fixed, .927 per image, one capsule per class
    # (the same seed: .815 with the softmax record's settings, .499 with "over" alone).
    # This profile's `flowbench run` records (10k test pairs): seeds 0-2 0.922, 0.910,
    # 0.911, each within .007 of its per-image score (one capsule per class).
    model = ModelConfig(coord_channels=False, pooled_params=True, layering="over",
                        shape_code="capsule")
    return TrainConfig(model=model, out=out, epochs=100, batch_size=32, lr=3e-3,
                       lr_schedule="cosine", warmup_steps=100, max_minutes=23.0, bf16=False,
                       w_appearance=3.0, prior_anneal=0.5, compile=True, cpu_ranks=0,
                       colour_shuffle=True)


def gpu_profile(out: str = "runs/flowcaps-gpu") -> TrainConfig:
    """The quick profile's model and losses on one GPU: a larger batch over the paper's 100k
    pairs, inside a time budget that fits a short GPU lease (data and evaluation included).

    Measured on an H100 with three runs sharing it (4.7k training pairs/s each, 1.48M pairs in
    5.25 minutes, 10k test pairs of the 5 x 5 data; results/gpu-2026-11-27): seeds 0-2 .903,
    .923, .925 fixed (circles .839-.886, the weak class), .933, .959, .955 with test-time pose
    refinement. The profile before it (softmax layering, shape codes read from the image, the
    occlusion-aware loss; three runs of 6.25 minutes sharing an H200, 2.4M pairs each, 4 x 4
    data; results/gpu-sweep-2026-11-26b) gave .866 and .908.
    """
    return quick_profile(out).replace(batch_size=128, warmup_steps=200, max_minutes=5.25,
                                      device="auto", cpu_ranks=1)


def long_profile(out: str = "runs/flowcaps-long") -> TrainConfig:
    """The quick profile run longer on the same 2-core CPU: the paper's 100k training pairs and
    a 135-minute budget (about 2.7M pairs at the quick profile's rate), the cosine schedule and
    the ramps stretched to match. Nothing else changes, so it measures what more training buys.

    Measured (`flowbench run flowcaps --profile long --seeds 0`, 2-core AMD EPYC, 10k test
    pairs): on the 5 x 5 data (2.40M pairs; results/flowcaps_geo_long_seed0.json) .952 (circle
    .915, square .979, triangle .978; .974 with pose refinement, squares .9995, triangles .998);
    on the 4 x 4 data (2.95M pairs; results/geo-4x4/flowcaps_geo_long_seed0.json) .958 fixed and
    per image (circle .949, square .964, triangle .965), against .922 for the quick record.
    Seed 1 (2.54M pairs; results/flowcaps_geo_long_seed1.json): .958 (.944, .969, .968).
    12-minute fine-tunes of that checkpoint (results/long-finetune-2026-11-26) moved squares and
    triangles no more with w_center at the paper's 1e-2, without the blurred levels, or with the
    occlusion-aware loss than a control fine-tune with nothing changed. What they miss is mostly
    the pixels that the generator's 4x4 subsamples cover exactly half (results/refine-2026-11-27).
    The 5 x 5 seed-0 run drew every circle with two capsules, one in front of the other; a
    14-minute fine-tune with the overlap term (w_overlap) removed the second one: .962 (circle
    .941; results/overlap-2026-11-27).
    """
    return quick_profile(out).replace(max_minutes=135.0)


def paper_profile(out: str = "runs/flowcaps-paper") -> TrainConfig:
    """The paper's settings (K=8, C=32, Adam 1e-4, 150 epochs over 100k pairs): a GPU run.

    The model follows the paper's equations (FC translation, uniform fallback, free depth, the
    mask-weighted centre loss at 1e-2); on this CPU those choices collapsed within minutes (see
    the switches' comments), so expect to need the quick profile's switches there too.
    """
    model = ModelConfig(translation_head="fc", dec_hidden=64, background="uniform",
                        depth_init=4.0, depth_min=0.0, scale_min=0.05)
    return TrainConfig(model=model, out=out, epochs=150, batch_size=64, lr=1e-4,
                       lr_schedule="constant", points=1024, smooth_points=128, blur_sigmas=(0.0,),
                       edge_sampling=0.0,
                       both_directions=False, w_center=1e-2, center_form="spread",
                       center_warmup=0.0, device="auto")


PROFILES: dict[str, Callable[..., TrainConfig]] = {"quick": quick_profile, "long": long_profile,
                                                   "gpu": gpu_profile, "paper": paper_profile}
