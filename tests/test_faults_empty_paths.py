"""An empty path (`--out "$UNSET"`) is refused by every command's path options, before any work,
instead of becoming the working directory."""
import pytest
from click.testing import CliRunner

from benchmark.cli import main as flowbench
from flowcaps.cli import main as flowcaps
from geogen.cli import main as geogen


@pytest.mark.parametrize("program, args", [
    (geogen, ["make", "--n", "4", "--out", ""]),
    (geogen, ["verify", ""]),
    (flowcaps, ["train", "", "--profile", "smoke"]),
    (flowcaps, ["train", "data/x", "--profile", "smoke", "--out", " "]),
    (flowbench, ["run", "flowcaps", "--profile", "smoke", "--results", ""]),
    (flowbench, ["run", "flowcaps", "--profile", "smoke", "--runs", ""]),
    (flowbench, ["table", "--results", ""]),
])
def test_an_empty_path_is_refused_before_any_work(program, args, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(program, args)
    assert res.exit_code == 2, res.output
    assert "is empty (an unset shell variable?); name a path" in res.output
    assert list(tmp_path.iterdir()) == []  # nothing written in the working directory


def test_an_empty_run_folder_in_a_config_is_refused(tmp_path):
    import trainloop
    from flowcaps import FlowcapsError, TrainConfig
    with pytest.raises(trainloop.LoopError, match="run folder \\(out\\) is empty"):
        trainloop.LoopConfig(out="", seed=0, batch_size=1, steps=1).validate()
    with pytest.raises(FlowcapsError, match="out \\(the run folder\\) is empty"):
        TrainConfig().replace(out=" ").validate()


@pytest.mark.parametrize("seed", [str(2**32), str(2**64), str(2**70), "-1"])
def test_a_seed_past_what_the_loop_draws_from_is_one_line(tiny_geo, tmp_path, seed):
    res = CliRunner().invoke(flowcaps, ["train", str(tiny_geo), "--profile", "smoke", "--out",
                                        str(tmp_path / "run"), "--seed", seed])
    assert res.exit_code == 1, res.output
    assert res.output.strip() == f"Error: seed must be in 0..{2**32 - 1}, got {seed}"
    assert not (tmp_path / "run").exists()
