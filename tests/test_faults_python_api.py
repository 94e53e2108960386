"""The Python API refuses what it cannot do in one FlowcapsError or GeogenError line: a device
this machine lacks, a refinement step that is not a number, a dtype that would wrap the data."""
import math

import numpy as np
import pytest
import torch

from flowcaps import FlowcapsError, RefineConfig, checkpoint
from geogen.dataset import open_split
from geogen.errors import GeogenError
from tests.test_flowcaps_train import tiny_config, tiny_pairs
from flowcaps import trainer as train_mod


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    return train_mod.fit(tiny_config(out, epochs=1), tiny_pairs(16), progress=False)


@pytest.mark.parametrize("device, says", [
    ("tpu", "unknown device 'tpu'"), ("meta", "device 'meta' is not supported"),
    ("cuda", "no CUDA device is available"), ("cuda:3", "no CUDA device is available"),
])
def test_load_on_a_device_this_machine_lacks_is_one_line(model_path, device, says, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(FlowcapsError, match=says):
        checkpoint.load(model_path, device=device)
    assert checkpoint.load(model_path, device="auto").encoder.head.weight.device.type == "cpu"


@pytest.mark.parametrize("lr", [math.nan, math.inf, 0.0, -1.0])
def test_a_refinement_rate_that_is_not_a_positive_number_is_refused(lr):
    with pytest.raises(FlowcapsError, match="refine needs"):
        RefineConfig(lr=lr).validate()


def test_a_dtype_that_would_wrap_the_data_is_refused(tiny_geo):
    split = open_split(tiny_geo, "train")
    with pytest.raises(GeogenError, match="'frames' is stored as uint8; int8 cannot hold"):
        split.read(("frames",), 4, dtypes={"frames": "int8"})
    with pytest.raises(GeogenError, match="'flow' is stored as float32; int16 cannot hold"):
        split.read(("flow",), 4, dtypes={"flow": "int16"})
    wide = split.read(("frames", "flow"), 4, dtypes={"frames": "int16", "flow": "float16"})
    exact = split.read(("frames",), 4)
    assert wide["frames"].dtype == np.int16 and np.array_equal(wide["frames"], exact["frames"])
