"""Two "nodes" on loopback (two torchrun agents of one rank each, meeting at a c10d rendezvous)
train the smoke profile exactly as one node with two ranks and the same global batch; a Ctrl-C
on one node stops both at one step, and the same commands resume to the same log."""
import csv
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from flowcaps import launch
from trainloop.errors import LoopError
from trainloop.rendezvous import Rendezvous

EPOCHS = "10"  # 30 steps of 8 pairs per rank: long enough to interrupt, seconds to run


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _agent(data, out, *extra) -> subprocess.Popen:
    """`flowcaps train` of the smoke profile, as a terminal's foreground job of its own."""
    return subprocess.Popen(
        [sys.executable, "-m", "flowcaps.cli", "train", str(data), "--profile", "smoke",
         "--out", str(out), "--device", "cpu", "--epochs", EPOCHS, "--set", "log_every=1",
         "--quiet", *extra], env={**os.environ, "OMP_NUM_THREADS": "1"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # CI may ignore SIGINT


def _two_nodes(data, out) -> list[subprocess.Popen]:
    endpoint = f"127.0.0.1:{_free_port()}"
    return [_agent(data, out, "--nnodes", "2", "--rdzv-endpoint", endpoint,
                   "--rdzv-id", "loopback") for _ in range(2)]


def _losses(path) -> list[dict]:
    """The log without its clock columns (seconds, pairs per second)."""
    return [{k: v for k, v in row.items() if k not in ("seconds", "pairs_per_s")}
            for row in csv.DictReader(open(path))]


def _kill(procs) -> None:
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)


def _wait_until_training(run, nodes, rows=4) -> None:
    """Until the run's log holds more than `rows` steps; every node still running."""
    deadline = time.monotonic() + 180
    while not ((run / "log.csv").exists() and len((run / "log.csv").read_text().splitlines()) > rows):
        assert all(p.poll() is None for p in nodes) and time.monotonic() < deadline, \
            "the nodes did not start training"
        time.sleep(0.1)


def _finish(procs, timeout=240) -> list[tuple[int, str]]:
    """Each process's exit status and standard error; a node still running after `timeout`
    seconds fails the test with what every node printed (seen once in a full suite: a node
    that did not exit after the Ctrl-C), and no process is left behind."""
    out = []
    try:
        for p in procs:
            _, err = p.communicate(timeout=timeout)
            out.append((p.returncode, err.strip()))
    except subprocess.TimeoutExpired:
        stuck = [i for i, p in enumerate(procs) if p.poll() is None]
        _kill(procs)
        said = [(i, p.communicate()[1].strip()[-2000:], p.returncode) for i, p in enumerate(procs)]
        pytest.fail(f"node(s) {stuck} still running after {timeout} s; "
                    + " | ".join(f"node {i} (exit {code}): {err}" for i, err, code in said))
    finally:
        _kill(procs)
    return out


def test_two_loopback_nodes_train_and_resume_as_one_node_of_two_ranks(tiny_geo, tmp_path):
    [(code, err)] = _finish([_agent(tiny_geo, tmp_path / "one", "--set", "cpu_ranks=2")])
    assert code == 0, err
    reference = _losses(tmp_path / "one" / "log.csv")
    assert [int(r["step"]) for r in reference] == list(range(1, 31))

    run = tmp_path / "two"
    nodes = _two_nodes(tiny_geo, run)
    try:
        _wait_until_training(run, nodes)
        os.killpg(nodes[1].pid, signal.SIGINT)  # Ctrl-C on one node: both stop at one step
    finally:
        results = _finish(nodes)
    for code, err in results:
        assert code == 130, err
        assert err.startswith("Error: interrupted at step ") and "\n" not in err, err
    stopped = _losses(run / "log.csv")
    assert 4 <= len(stopped) < 30 and stopped == reference[:len(stopped)]

    results = _finish(_two_nodes(tiny_geo, run))  # the same commands resume
    assert [code for code, _ in results] == [0, 0], results
    assert _losses(run / "log.csv") == reference
    # Global rank 0 alone wrote the checkpoint; each node's launcher took its ranks' config
    # file away when they ended.
    assert sorted(p.name for p in run.iterdir()) == ["checkpoint.pt", "log.csv", "model.pt"]


def test_nodes_started_with_different_settings_refuse_to_train(tiny_geo, tmp_path):
    endpoint = f"127.0.0.1:{_free_port()}"
    run = tmp_path / "run"
    nodes = [_agent(tiny_geo, run, "--nnodes", "2", "--rdzv-endpoint", endpoint,
                    "--rdzv-id", "differ", *extra)
             for extra in ([], ["--set", "lr=0.001", "--set", "log_every=2"])]
    results = _finish(nodes)
    for code, err in results:
        assert code == 1, err
        assert err == ("Error: the ranks were started with different settings (fields "
                       "['loop.log_every', 'lr']); start every node with the same command"), err
    assert not (run / "model.pt").exists() and not (run / "log.csv").exists()


def test_rendezvous_flags_and_their_errors():
    assert Rendezvous().torchrun_args(2) == ["--standalone", "--nproc-per-node=2",
                                             "--max-restarts=0"]
    assert Rendezvous(2, 1, "h:29400", "x").torchrun_args(4) == [
        "--nnodes=2", "--nproc-per-node=4", "--rdzv-backend=c10d", "--rdzv-endpoint=h:29400",
        "--rdzv-id=x", "--rdzv-conf=join_timeout=600", "--max-restarts=0", "--node-rank=1"]
    assert Rendezvous(2, None, "h:1", join_timeout=30, max_restarts=3).torchrun_args(1)[-2:] == [
        "--rdzv-conf=join_timeout=30", "--max-restarts=3"]
    for bad, says in [(Rendezvous(2), "needs --rdzv-endpoint"),
                      (Rendezvous(2, endpoint="host"), "needs --rdzv-endpoint"),
                      (Rendezvous(2, 2, "h:1"), "--node-rank must be in 0..1"),
                      (Rendezvous(1, endpoint="h:1"), "for --nnodes 2 or more"),
                      (Rendezvous(1, join_timeout=60), "--rdzv-timeout are for --nnodes 2"),
                      (Rendezvous(2, endpoint="h:1", join_timeout=0),
                       r"--rdzv-timeout must be in 1\.\.86400 seconds, got 0"),
                      (Rendezvous(2, endpoint="h:1", join_timeout=86401), "--rdzv-timeout must"),
                      (Rendezvous(max_restarts=-1), r"--max-restarts must be in 0\.\.100, got -1"),
                      (Rendezvous(max_restarts=101), "--max-restarts must be in 0..100"),
                      (Rendezvous(0), "--nnodes must be >= 1")]:
        with pytest.raises(LoopError, match=says):
            bad.validate()


def test_a_bad_rendezvous_is_one_line_before_torchrun_starts(tiny_geo, tmp_path):
    proc = _agent(tiny_geo, tmp_path / "run", "--nnodes", "2")
    [(code, err)] = _finish([proc], timeout=60)
    assert code == 1 and err == ("Error: --nnodes 2 needs --rdzv-endpoint HOST:PORT (where the "
                                 "nodes meet), got None")
    assert not (tmp_path / "run").exists()


def test_a_node_whose_peers_never_join_ends_in_one_line(tiny_geo, tmp_path):
    """Before: the node waited torchrun's 600 s, then printed a 40-line traceback."""
    endpoint = f"127.0.0.1:{_free_port()}"
    run = tmp_path / "run"
    node = _agent(tiny_geo, run, "--nnodes", "2", "--rdzv-endpoint", endpoint, "--node-rank",
                  "0", "--rdzv-timeout", "2")
    [(code, err)] = _finish([node])
    log = _log_of(run, node)
    assert code == 1 and err == (
        f"Error: node 0 of 2: the other node(s) did not join {endpoint} within 2 s (start them "
        f"with the same --rdzv-endpoint and --nnodes; --rdzv-timeout sets the wait); the output "
        f"of torchrun and its ranks is in {log}"), err
    assert "RendezvousTimeoutError" in log.read_text()  # torchrun's own account, kept
    assert not (run / "log.csv").exists()


def _log_of(run, node: subprocess.Popen):
    """The file holding a node's torchrun output (named by its launcher's host and pid)."""
    return run / f"torchrun.{socket.gethostname()}-{node.pid}.log"


def _tree(pid: int) -> list[int]:
    """pid and every process below it, the deepest first."""
    return [q for kid in launch.children(pid) for q in _tree(kid)] + [pid]


def test_a_node_killed_mid_training_leaves_the_other_one_line(tiny_geo, tmp_path):
    """A node lost at once (its launcher, torchrun and ranks SIGKILLed, as a power cut does):
    the other ends in one line naming it and the checkpoint kept (before: a 107-line gloo
    traceback, or torchrun's store traceback where the lost node served the rendezvous)."""
    endpoint = f"127.0.0.1:{_free_port()}"
    run = tmp_path / "run"
    nodes = [_agent(tiny_geo, run, "--nnodes", "2", "--rdzv-endpoint", endpoint, "--rdzv-id",
                    "kill", "--node-rank", str(i), "--set", "checkpoint_minutes=0")
             for i in range(2)]
    try:
        _wait_until_training(run, nodes)
        for pid in _tree(nodes[1].pid):
            os.kill(pid, signal.SIGKILL)
    finally:
        [(code, err)] = _finish(nodes[:1])
        _finish(nodes[1:])
    step = launch._saved_step(run / "checkpoint.pt")
    log = _log_of(run, nodes[0])
    assert code == 1 and err == (
        f"Error: node 1 stopped (its ranks lost the connection to the others); the checkpoint "
        f"at step {step} is kept: start every node again with the same command to resume; the "
        f"output of torchrun and its ranks is in {log}"), err
    assert step is not None and step >= 4


def test_each_node_starts_its_share_of_the_ranks(monkeypatch):
    from flowcaps.profiles import smoke
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    cfg = smoke().replace(cpu_ranks=2)
    assert launch.ranks_for(cfg, "cpu", Rendezvous(2, endpoint="h:1")) == 2
    assert launch.per_rank_config(cfg, 2 * 2).loop.batch_size == cfg.loop.batch_size // 4


def test_torchrun_runs_with_the_stopping_warnings_quiet_and_a_users_levels_kept(tmp_path, monkeypatch):
    """The node left behind when the rendezvous host stops first printed a c10d store warning and
    a rendezvous warning before its one-line message (seen once in CI); both are warnings, both
    quiet under torchrun's environment, and an error still prints."""
    for name in ("LOGLEVEL", "TORCH_LOGS", "TORCH_CPP_LOG_LEVEL"):
        monkeypatch.delenv(name, raising=False)
    env = launch.torchrun_env(tmp_path / "rank_error.txt")
    assert env["OMP_NUM_THREADS"] == "1" and env[launch.ERROR_ENV].endswith("rank_error.txt")
    script = ("import logging, torch\n"
              "from torch.distributed.elastic.rendezvous import dynamic_rendezvous as d\n"
              "d.logger.warning('rendezvous warning')\n"
              "d.logger.error('rendezvous error')\n")
    said = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert "rendezvous error" in said.stderr and "rendezvous warning" not in said.stderr
    assert env["TORCH_CPP_LOG_LEVEL"] == "ERROR"  # the store's "recvVector failed" is a warning
    monkeypatch.setenv("TORCH_LOGS", "+distributed")
    assert launch.torchrun_env(tmp_path / "e")["TORCH_LOGS"] == "+distributed"
