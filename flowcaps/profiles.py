"""The named training profiles, each its difference from the paper's settings, and each kind of
data's difference from a profile.

`paper` is the dataclass defaults of `flowcaps.config`: what the paper states and its equations.
`quick` changes what made the model train on Geo; `long` changes the budget and adds the
slow-flow prior, `gpu` the budget and the batch; `smoke` is `quick` scaled down for tests. Data
of some variants (as its manifest names them) trains with a few more changes, `BY_VARIANT`, in
every profile. `for_data` puts the two together: `flowcaps train DATA --profile P` and
`flowbench run flowcaps --profile P` both build their config with it. Each change has a section
in `docs/deviations.md` with the runs behind it.
"""
from __future__ import annotations

from typing import Any, Callable

from flowcaps.config import TrainConfig
from flowcaps.errors import FlowcapsError


def paper(out: str = "runs/flowcaps-paper") -> TrainConfig:
    """The paper's settings and equations (docs/deviations.md, "The paper profile"): a GPU run
    of 150 epochs over 100k pairs, every loss over the full grid."""
    return TrainConfig().replace(loop={"out": out})


def quick(out: str = "runs/flowcaps-quick") -> TrainConfig:
    """CPU profile: Geo 64 px, 512k training pairs (about 45 minutes alone on a 2-core CPU)."""
    model = dict(
        translation_head="softargmax",  # heat-map detection: "Translation from a heat map"
        coord_channels=False,  # with them capsules owned regions: "Translation from a heat map"
        pooled_params=True,  # "Pooled capsule numbers"
        shape_code="capsule",  # "One shape code per capsule"
        layering="over",  # "Front-to-back compositing"
        background="static",  # "Static background and a depth floor"
        depth_init=10.0, depth_min=8.0,
        dec_hidden=32, dec_depth=3,  # "Decoder width and depth"
        scale_min=0.1,  # "Scale floor": the smallest Geo shape
    )
    return paper(out).replace(
        model=model,
        # "Budget and optimiser": 512k pairs (16k steps of 32) on two CPU ranks, compiled; in
        # float32 (bf16 is an opt-in, "bf16 autocast").
        loop={"rows": 512_000, "batch_size": 32}, lr=3e-3, lr_schedule="cosine",
        warmup_steps=100, compile=True, cpu_ranks=2,
        # "Sampled pixels": fewer points, drawn towards edges; L_smooth in pixels ("Smoothness units").
        points=256, smooth_points=32, edge_sampling=0.8, smooth_form="pixels",
        blur_sigmas=(0.0, 1.5, 3.0),  # "Blurred render levels"
        both_directions=True,  # "Both directions": twice the signal per encoder pass
        w_center=0.1, center_form="spread_image", center_warmup=0.3,  # "The centre term"
        w_appearance=3.0, appearance_background="still",  # "Appearance term"
        prior_anneal=0.5,  # "Translation from a heat map": the ring prior fades out
        colour_shuffle=True,  # "Colour shuffle"
    )


def long(out: str = "runs/flowcaps-long") -> TrainConfig:
    """The quick profile for 2.4M pairs over the paper's 100k: what more training buys."""
    # "The slow-flow prior": over a long run the spare capsule on Geo's plain background moves.
    return quick(out).replace(loop={"rows": 2_400_000}, w_slow=1e-3)


def gpu(out: str = "runs/flowcaps-gpu") -> TrainConfig:
    """The quick profile's model and losses on one GPU: batch 128, 1.47M pairs (what 5.25
    minutes of an H100 trained), 100k pairs."""
    return quick(out).replace(loop={"batch_size": 128, "rows": 1_472_000}, warmup_steps=200,
                              cpu_ranks=1)


def smoke(out: str = "runs/flowcaps-smoke") -> TrainConfig:
    """The quick profile scaled down for the contract test: a smaller network, a few dozen
    steps, one process and thread, no compile; the same model family as quick trains."""
    # One thread: a model this small gains nothing from a second one, which mostly waits.
    return quick(out).replace(
        model={"enc_channels": (16, 16, 32, 32), "enc_hidden": 64},
        loop={"epochs": 2, "rows": None, "batch_size": 16, "threads": 1,
              "checkpoint_minutes": 10.0, "log_every": 5},
        points=128, smooth_points=16, blur_sigmas=(0.0,), both_directions=False,
        warmup_steps=0, compile=False, cpu_ranks=1)


# In the order `flowbench` lists the benchmark's profiles (benchmark.profiles; a test keeps the
# two the same), smoke last.
PROFILES: dict[str, Callable[..., TrainConfig]] = {"quick": quick, "gpu": gpu, "long": long,
                                                   "paper": paper, "smoke": smoke}

_ARTICULATED: dict[str, tuple[Any, str]] = {
    "model.num_capsules": (16, "the paper's Exercise setting, K = 16: ten parts and spares: "
                               "\"The articulated figures' capsules\""),
    "model.capsule_dim": (16, "the paper's Exercise setting, C = 16 (|s| = 11): "
                              "\"The articulated figures' capsules\""),
}
# What every profile changes for data of a variant, field by field ("model." for a model
# field), each with its reason: the section of docs/deviations.md that gives the runs.
# Articulated+ (the figures textured on photographs) takes the articulated setting as it is:
# no run has tuned anything for it yet.
BY_VARIANT: dict[str, dict[str, tuple[Any, str]]] = {
    "geo+": {
        "mix_first": (0.35, "Geo's pairs alone first teach the shapes that Geo+'s textures hide: "
                            "\"Geo's pairs in Geo+ training\""),
        "model.enc_norm": (8, "GroupNorm finds the textured shapes on photographs sooner: "
                              "\"GroupNorm in Geo+ training\""),
    },
    "articulated": _ARTICULATED,
    "articulated+": _ARTICULATED,
}
# The variant whose training pairs (TrainConfig.mix_data) data of a variant also trains on.
MIX_WITH: dict[str, str] = {"geo+": "geo"}


def for_data(profile: str, variant: str, *, out: str | None = None, mix_data: str | None = None,
             image_size: int | None = None) -> TrainConfig:
    """Profile `profile` for data of `variant` at side `image_size` (None: the profile's),
    training on `mix_data`'s pairs too where given; `out` None keeps the profile's folder."""
    if profile not in PROFILES:
        raise FlowcapsError(f"no profile {profile!r}; choose from {', '.join(PROFILES)}")
    cfg = PROFILES[profile]() if out is None else PROFILES[profile](out)
    model: dict[str, Any] = {} if image_size is None else {"image_size": image_size}
    train: dict[str, Any] = {} if mix_data is None else {"mix_data": mix_data}
    for key, (value, _why) in BY_VARIANT.get(variant, {}).items():
        if key.startswith("model."):
            model[key[len("model."):]] = value
        else:
            train[key] = value
    return cfg.replace(model=model, **train)
