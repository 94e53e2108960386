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
        TrainConfig(out=" ").validate()
