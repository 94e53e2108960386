"""The FlowCapsules settings the unit tests build their tiny models and losses on.

The config defaults are the paper's (the `paper` profile). The tests exercise the parts the
quick profile trains with instead: the heat-map translation head over the static background
with its depth floor, the smaller decoder and scale floor; the blurred, two-way, edge-sampled
render loss and the image-frame centre term with its warm-up. A test's own settings go on top.
"""
from flowcaps.config import ModelConfig, TrainConfig

MODEL = dict(translation_head="softargmax", background="static", depth_init=10.0, depth_min=8.0,
             dec_hidden=32, dec_depth=3, scale_min=0.1)
TRAIN = dict(points=256, smooth_points=32, smooth_form="pixels", edge_sampling=0.8, blur_sigmas=(0.0, 1.5, 3.0),
             both_directions=True, w_center=0.1, center_form="spread_image", center_warmup=0.3)


def model_config(**changes) -> ModelConfig:
    return ModelConfig(**{**MODEL, **changes})


def train_config(**changes) -> TrainConfig:
    return TrainConfig().replace(**{**TRAIN, **changes})  # loop fields by their bare names
