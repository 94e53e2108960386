"""Nothing lost: SIGTERM to a one-process training saves its checkpoint, and a resumed run's
log holds no step twice and no row of a run that died before its first checkpoint."""
import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch

import trainloop
from flowcaps import checkpoint
from flowcaps.launch import children as _children
from tests.test_flowcaps_train import tiny_config
from tests.test_trainloop import Toy, _cfg, _data

ROOT = Path(__file__).resolve().parents[1]


def _wait_for(predicate, timeout=120.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def _logged_steps(path: Path) -> list[int]:
    if not path.exists():
        return []
    return [int(r["step"]) for r in csv.DictReader(open(path))]


def test_sigterm_to_a_one_process_training_saves_its_checkpoint(tiny_geo, tmp_path):
    out = tmp_path / "run"
    spec = tmp_path / "spec.json"
    # A long budget and no periodic checkpoint: only the SIGTERM's save can leave one.
    spec.write_text(tiny_config(out, epochs=10_000, cpu_ranks=1, threads=1,
                                checkpoint_minutes=600.0).to_json())
    proc = subprocess.Popen([sys.executable, "-m", "flowcaps.cli", "train", str(tiny_geo),
                             "--config", str(spec), "--quiet"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert _wait_for(lambda: len(_logged_steps(out / "log.csv")) >= 3), "no log rows"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode != 0 and "interrupted at step" in err, err
    assert (out / "checkpoint.pt").exists() and not (out / "model.pt").exists()
    saved = checkpoint.read(out / "checkpoint.pt")
    step = json.loads(saved["progress"])["step"]
    assert step >= 3 and max(_logged_steps(out / "log.csv")) <= step


def test_a_resume_drops_the_rows_logged_after_its_checkpoint(tmp_path):
    straight, _ = trainloop.fit(Toy(), _cfg(tmp_path / "a", steps=40), _data(), progress=False)
    trainloop.fit(Toy(), _cfg(tmp_path / "b", steps=20), _data(), progress=False)
    log = tmp_path / "b" / "log.csv"
    # A run killed after its checkpoint at step 20 had logged steps 24 and 28, and a row cut
    # short: its resume trains those steps again.
    rows = log.read_text()
    log.write_text(rows + "24,2,192,1.0,0.1,9.9,9.9,10.0\n28,3,224,1.0,0.1,9.9,9.9,10.0\n28,3")
    resumed, _ = trainloop.fit(Toy(), _cfg(tmp_path / "b", steps=40), _data(), progress=False)
    assert torch.equal(straight.weight, resumed.weight)
    assert _logged_steps(log) == list(range(4, 41, 4))
    assert _without_timing(tmp_path / "a" / "log.csv") == _without_timing(log)


def _without_timing(path):
    return [{k: v for k, v in r.items() if k not in ("seconds", "samples_per_s")}
            for r in csv.DictReader(open(path))]


def test_a_run_that_died_before_its_first_checkpoint_starts_a_fresh_log(tmp_path):
    trainloop.fit(Toy(), _cfg(tmp_path / "a", steps=12), _data(), progress=False)
    (tmp_path / "b").mkdir()
    # Its rows 4 and 8 were logged, then it died with no checkpoint: it trains afresh.
    (tmp_path / "b" / "log.csv").write_text((tmp_path / "a" / "log.csv").read_text()
                                            .rsplit("\n12,", 1)[0] + "\n")
    trainloop.fit(Toy(), _cfg(tmp_path / "b", steps=12), _data(), progress=False)
    assert _logged_steps(tmp_path / "b" / "log.csv") == [4, 8, 12]
    assert _without_timing(tmp_path / "a" / "log.csv") == _without_timing(tmp_path / "b" / "log.csv")


def test_a_second_training_into_a_folder_in_use_is_refused(tiny_geo, tmp_path):
    from click.testing import CliRunner
    from flowcaps.cli import main
    from trainloop import lock

    out = tmp_path / "run"
    spec = tmp_path / "spec.json"
    for ranks in (1, 2):  # one process (the loop's lock) and the launcher of two ranks
        spec.write_text(tiny_config(out, epochs=1, cpu_ranks=ranks).to_json())
        with lock.hold(out):  # another training holds it
            res = CliRunner().invoke(main, ["train", str(tiny_geo), "--config", str(spec),
                                            "--quiet"])
        assert res.exit_code == 1, res.output
        assert f"run folder {out} is in use by another training (pid {os.getpid()})" in res.output
        assert not (out / "checkpoint.pt").exists() and not (out / "log.csv").exists()
    with lock.hold(out):
        pass  # free again: the refused runs held nothing
    res = CliRunner().invoke(main, ["train", str(tiny_geo), "--config", str(spec), "--quiet"])
    assert res.exit_code == 0, res.output


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_the_ranks_end_with_their_launcher_when_it_is_killed(tiny_geo, tmp_path):
    out = tmp_path / "run"
    spec = tmp_path / "spec.json"
    spec.write_text(tiny_config(out, epochs=10_000, cpu_ranks=2, threads=1).to_json())
    proc = subprocess.Popen([sys.executable, "-m", "flowcaps.cli", "train", str(tiny_geo),
                             "--config", str(spec), "--quiet"], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    family: list[int] = []
    try:
        assert _wait_for(lambda: len(_logged_steps(out / "log.csv")) >= 2), "no log rows"
        torchrun = _children(proc.pid)
        family = torchrun + [r for t in torchrun for r in _children(t)]
        assert len(family) >= 3, family  # torchrun and its two ranks
        proc.kill()  # kill -9: the launcher can do nothing
        proc.wait()
        assert _wait_for(lambda: not any(_alive(p) for p in family), timeout=90), \
            [p for p in family if _alive(p)]
    finally:
        for pid in family:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert not (out / "model.pt").exists()
