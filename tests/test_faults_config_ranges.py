"""Config values are checked for range, not only type: each bad value is one line naming the
field, before any process starts or any file is written; NaN and inf are refused everywhere."""
import json

import pytest
from click.testing import CliRunner

from flowcaps.cli import main as flowcaps
from flowcaps import TrainConfig


@pytest.mark.parametrize("setting, says", [
    ("model.dec_hidden=0", "dec_hidden must be >= 1, got 0"),
    ("model.enc_hidden=0", "enc_hidden must be >= 1, got 0"),
    ("model.enc_channels=[]", "enc_channels must be one or more channel counts >= 1, got []"),
    ("model.enc_channels=[0,0,0,0]", "enc_channels must be one or more channel counts >= 1"),
    ("edge_sampling=5", "edge_sampling must be a fraction in [0, 1], got 5.0"),
    ("model.trans_bound=0", "trans_bound must be > 0, got 0.0"),
    ("model.scale_init=-1", "scale_init must be > 0, got -1.0"),
    ("lr=NaN", "lr must be a finite number, got nan"),
    ("w_smooth=Infinity", "w_smooth must be a finite number, got inf"),
])
def test_an_out_of_range_setting_is_one_line_before_any_work(tiny_geo, tmp_path, setting, says):
    res = CliRunner().invoke(flowcaps, ["train", str(tiny_geo), "--profile", "smoke", "--out",
                                        str(tmp_path / "run"), "--set", setting])
    assert res.exit_code == 1, res.output
    assert len(res.output.strip().splitlines()) == 1 and says in res.output, res.output
    assert not (tmp_path / "run").exists()


def test_nan_in_a_config_file_and_the_lr_option_are_refused(tiny_geo, tmp_path):
    raw = json.loads(TrainConfig().to_json())
    raw["w_center"] = float("nan")
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(raw))  # JSON's NaN, as Python writes it
    res = CliRunner().invoke(flowcaps, ["train", str(tiny_geo), "--config", str(spec)])
    assert res.exit_code == 1 and "w_center must be a finite number, got nan" in res.output
    res = CliRunner().invoke(flowcaps, ["train", str(tiny_geo), "--profile", "smoke", "--lr", "nan"])
    assert res.exit_code == 1 and "lr must be a finite number, got nan" in res.output
