"""How a command line's process ends (trainloop.ddp.run_program): as usual outside a process
group; after leaving one, through os._exit with the command's status, its exit handlers run and
its output flushed (the interpreter's teardown after gloo aborted now and then)."""
import subprocess
import sys
import textwrap

import pytest

from trainloop import ddp

SCRIPT = textwrap.dedent("""
    import atexit, sys
    import torch.distributed as dist
    from trainloop import ddp

    class Teardown:  # the interpreter's teardown deletes it; os._exit skips that teardown
        def __del__(self):
            print("teardown", flush=True)

    kept = Teardown()

    def main():
        atexit.register(lambda: print("exit handler ran", flush=True))
        if {join}:
            dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
            ddp.leave()
        sys.stdout.write("unflushed")  # no newline: os._exit alone would lose it
        sys.exit({code!r})

    {program}
    print("never reached")
""")
# flowcaps' entry point calls run_program; flowbench's its own program(), which imports torch
# only for the commands that train
PROGRAMS = {"run_program": "ddp.run_program(main)",
            "flowbench": "from benchmark import cli; cli.main = main; cli.program()"}


def _run(join: bool, code, program: str = "run_program") -> subprocess.CompletedProcess:
    script = SCRIPT.format(join=join, code=code, program=PROGRAMS[program])
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("program", sorted(PROGRAMS))
@pytest.mark.parametrize("join", [False, True])
def test_the_status_output_and_exit_handlers_survive_either_way(join, program):
    done = _run(join, 3, program)
    assert done.returncode == 3, done.stderr
    assert done.stdout.startswith("unflushed") and "exit handler ran" in done.stdout
    assert "never reached" not in done.stdout
    assert ("teardown" in done.stdout) is not join


def test_a_message_exit_after_leaving_a_group_prints_it_and_exits_1():
    done = _run(True, "training failed: disk full")
    assert done.returncode == 1
    assert "training failed: disk full" in done.stderr


def test_outside_a_group_it_exits_as_python_does():
    assert not ddp._left.is_set()
    with pytest.raises(SystemExit) as stop:
        ddp.run_program(lambda: None)
    assert stop.value.code == 0
    with pytest.raises(SystemExit) as stop:
        ddp.run_program(lambda: sys.exit("bad input"))
    assert stop.value.code == "bad input"
