"""`flowbench`: run methods, print the paper's tables, run ablations, draw figures, publish.

Bad input (unknown method or profile, missing checkpoint or data folder, a record that would be
replaced, old records, empty results) ends with a one-line message and a non-zero exit, never a
traceback, and before any work.
"""
from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Callable

import click

from benchmark import profiles
from benchmark.errors import BenchmarkError, StopLine
from benchmark.records import COMMITTED, LOCAL
from benchmark.show import KINDS as SHOW_KINDS
from geogen.errors import GeogenError
from geogen.outpath import PathParam
from geogen.schema import VARIANTS
from geogen.stopping import exit_status, signals_raise


def _friendly(fn=None, *, resume: Callable[[dict], str] | None = None):
    """Turn project errors into click's one-line error and exit status 1, and a Ctrl-C (or
    SIGTERM) into one line saying how to resume, `resume(the command's options)`, and exit
    status 130 (143), as geogen and flowcaps answer them."""
    if fn is None:
        return functools.partial(_friendly, resume=resume)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        received: list[int] = []
        stop_line = None  # the stop's own account (jobs left running), where it gave one
        try:
            with signals_raise(received):
                return fn(*args, **kwargs)
        except KeyboardInterrupt:
            pass
        except (BenchmarkError, GeogenError) as err:
            if not received:
                raise click.ClickException(str(err)) from None
            if isinstance(err, StopLine):
                stop_line = str(err)
            # else the error a stop caused: a method's training saved its checkpoint and
            # reported the interrupt as its own error
        how, status = exit_status(received)
        hint = stop_line or (resume(kwargs) if resume else "run the same command again")
        click.echo(f"{how}; {hint}", err=True)
        sys.exit(status)
    return wrapper


def _run_resume(options: dict) -> str:
    from benchmark.registry import METHODS
    from benchmark.runner import resume_line
    method = METHODS.get(options.get("method", ""))  # registered once the run was planned
    return resume_line(options["runs"], options["force"], options.get("checkpoint"),
                       trains_nothing=method is not None and method.train is None)


def _seeds(text: str) -> tuple[int, ...]:
    try:
        seeds = tuple(int(s) for s in text.split(",") if s.strip())
    except ValueError:
        raise BenchmarkError(f"--seeds takes comma-separated integers, got {text!r}") from None
    if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise BenchmarkError(f"--seeds needs distinct non-negative integers, got {text!r}")
    return seeds


class ProfileChoice(click.Choice):
    """The visible profiles as choices (listed in --help); hidden ones are accepted too."""

    def __init__(self) -> None:
        super().__init__(list(profiles.visible()))

    def convert(self, value, param, ctx):
        if value in profiles.PROFILES:
            return value
        return super().convert(value, param, ctx)


_PROFILE_HELP = "; ".join(f"{n}: {profiles.PROFILES[n].summary}" for n in profiles.visible())


def _profile_option(default: str | None = "quick", help_extra: str = ""):
    return click.option("--profile", type=ProfileChoice(), default=default,
                        show_default=default is not None, help=_PROFILE_HELP + help_extra)


def _slurm(executor, partition, gpus, cpus, time_limit, log_folder, dry_run):
    """The Slurm options, or None for the local executor (they are then refused if given);
    submitit-local: the same jobs as processes of this machine (submitit's LocalExecutor)."""
    from benchmark.executor import SlurmOptions
    opts = SlurmOptions(partition=partition, gpus_per_job=gpus, cpus_per_job=cpus,
                        time_minutes=time_limit, log_folder=log_folder,
                        cluster="slurm" if executor == "slurm" else "local")
    if executor == "local":
        if (opts.partition, opts.gpus_per_job, opts.cpus_per_job, opts.time_minutes,
                opts.log_folder) != (None, 1, 8, 60, Path("runs/slurm")):
            raise BenchmarkError("--partition, --gpus, --cpus, --time-limit and --log-folder "
                                 "are for --executor slurm")
        if dry_run:
            raise BenchmarkError("--dry-run is for --executor slurm or submitit-local (a local "
                                 "run submits nothing)")
        return None
    opts.validate()
    return opts


# --executor: this process (one seed after another), Slurm jobs, or those jobs as processes here
EXECUTORS = ("local", "slurm", "submitit-local")


def _run_options(fn):
    for option in reversed([
        click.option("--dataset", type=click.Choice(VARIANTS), default="geo", show_default=True),
        _profile_option(),
        click.option("--seeds", default="0", show_default=True, help="e.g. 0,1,2 for mean +- std"),
        click.option("--data", type=PathParam(path_type=Path), default=None,
                     help="dataset folder to use as it is (default: the profile's folder "
                          "under data/, made if missing)"),
        click.option("--make-data", is_flag=True,
                     help="make the profile's data in --data when that folder does not exist"),
        click.option("--results", type=PathParam(path_type=Path), default=LOCAL,
                     show_default=True, help=f"record tree to write ({COMMITTED} holds the "
                                             f"committed records)"),
        click.option("--runs", type=PathParam(path_type=Path), default=Path("runs/flowbench"),
                     show_default=True, help="training run folders (resumable)"),
        click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto",
                     show_default=True),
        click.option("--force", is_flag=True,
                     help="replace records that exist, training from scratch"),
        click.option("--executor", type=click.Choice(EXECUTORS), default="local",
                     show_default=True, help="slurm: one Slurm job per seed and run (one job "
                                             "array), through submitit (pip install "
                                             "'.[cluster]'; docs/cluster.md); submitit-local: "
                                             "those jobs as processes of this machine"),
        click.option("--dry-run", is_flag=True, help="slurm: print the sbatch script and the "
                                                     "jobs, submit nothing, make no data"),
        click.option("--partition", default=None, help="slurm: the partition [the cluster's "
                                                       "default]"),
        click.option("--gpus", type=int, default=1, show_default=True,
                     help="slurm: GPUs per job (several: flowcaps trains one rank per GPU; "
                          "methods that train on one GPU refuse them)"),
        click.option("--cpus", type=int, default=8, show_default=True,
                     help="slurm: CPU cores per job"),
        click.option("--time-limit", type=int, default=60, show_default=True,
                     help="slurm: minutes per job"),
        click.option("--log-folder", type=PathParam(path_type=Path),
                     default=Path("runs/slurm"), show_default=True,
                     help="slurm: submitit's folder (each job's output and error)"),
    ]):
        fn = option(fn)
    return fn


@click.group()
def main() -> None:
    """FlowCapsules benchmark: runs, the paper's tables and figures."""


class _RunCommand(click.Command):
    """`run`'s help lists the registered methods, read from the registry when it is shown."""

    def format_help_text(self, ctx, formatter):
        super().format_help_text(ctx, formatter)
        from benchmark.registry import load_methods
        with formatter.indentation():
            formatter.write_paragraph()
            formatter.write_text("METHOD: " + ", ".join(load_methods()) + " (flowbench list "
                                 "gives each one's budget per profile).")


def _example(*commands: str) -> str:
    """An epilog giving `commands` as typed (the \\b keeps click from rewrapping them)."""
    return "\b\nExample" + "s" * (len(commands) > 1) + ":\n" + "\n".join(f"  {c}" for c in commands)


@main.command("run", cls=_RunCommand, epilog=_example(
    "flowbench run flowcaps --profile quick --seeds 0,1,2",
    "flowbench run psd --checkpoint checkpoints/psd_geo_quick.pt"))
@click.argument("method")
@_run_options
@click.option("--checkpoint", type=PathParam(path_type=Path), default=None,
              help="evaluate this checkpoint instead of training (makes only the test pairs "
                   "and k-means pairs it reads when the data is missing)")
@click.option("--test-limit", type=click.IntRange(min=1), default=None,
              help="score only the first N test pairs: a partial record, which the tables skip")
@_friendly(resume=_run_resume)
def run_cmd(method, dataset, profile, seeds, data, make_data, results, runs, device, force,
            executor, dry_run, partition, gpus, cpus, time_limit, log_folder, checkpoint,
            test_limit):
    """Make the data if missing, train METHOD (resuming), evaluate, write a record per seed
    (with --executor slurm: a Slurm job per seed)."""
    from benchmark.runner import RunRequest, execute, plan
    slurm = _slurm(executor, partition, gpus, cpus, time_limit, log_folder, dry_run)
    from trainloop.allocator import keep_freed_memory
    keep_freed_memory()  # evaluation batches reuse freed memory (benchmark.runner._execute_logged)
    p = plan(RunRequest(method=method, dataset=dataset, profile=profile, seeds=_seeds(seeds),
                        data=data, make_data=make_data, results=results, runs=runs,
                        device=device, checkpoint=checkpoint, test_limit=test_limit,
                        force=force))
    if slurm is not None:  # before a word is printed or a job submitted
        from benchmark.registry import check_gpus
        check_gpus(p.method, slurm.gpus_per_job)
    click.echo(p.budget_line())
    if slurm is not None:
        from benchmark.executor import submit_all
        submit_all([p], slurm, echo=click.echo, dry_run=dry_run)
        return
    from trainloop import ddp
    try:
        execute(p, echo=click.echo)
    finally:
        ddp.leave()  # a rank of `torchrun ... -m benchmark.cli run`


@main.command("ablate", epilog=_example("flowbench ablate --dataset geo --profile gpu --jobs 4"))
@_run_options
@click.option("--jobs", type=click.IntRange(min=1), default=1, show_default=True,
              help="runs at a time, each in its own process (several small runs share one "
                   "GPU); a time-budgeted profile then trains each on its share of the device")
@_friendly(resume=_run_resume)
def ablate_cmd(dataset, profile, seeds, data, make_data, results, runs, device, force,
               executor, dry_run, partition, gpus, cpus, time_limit, log_folder, jobs):
    """Run Table 3's grid for FlowCapsules (benchmark/paper_tables.py: K, |s|; decoder depth
    and depth ordering on Geo); with --executor slurm, a Slurm job per run and seed."""
    from benchmark.paper_tables import TABLE3_METHOD
    from benchmark.runner import RunRequest, ablation_requests, execute_all, plan
    from trainloop.allocator import keep_freed_memory
    keep_freed_memory()  # evaluation batches reuse freed memory (benchmark.runner._execute_logged)
    slurm = _slurm(executor, partition, gpus, cpus, time_limit, log_folder, dry_run)
    if slurm is not None and jobs > 1:
        raise BenchmarkError("--jobs is for --executor local; Slurm runs one job per run and seed")
    base = RunRequest(method=TABLE3_METHOD, dataset=dataset, profile=profile,
                      seeds=_seeds(seeds), data=data, make_data=make_data, results=results,
                      runs=runs, device=device, force=force)
    plans = [plan(r) for r in ablation_requests(base)]  # every run checked before the first
    if slurm is not None:
        from benchmark.registry import check_gpus
        check_gpus(plans[0].method, slurm.gpus_per_job)
    click.echo(f"{len(plans)} runs, {plans[0].method.budgets[profile]} each per seed"
               + (f", {jobs} at a time" if jobs > 1 else ""))
    if slurm is not None:
        from benchmark.executor import submit_all
        submit_all(plans, slurm, echo=click.echo, dry_run=dry_run)
    else:
        execute_all(plans, jobs, echo=click.echo)


@main.command("table", epilog=_example("flowbench table --profile quick",
                                        "flowbench table --format csv -o tables.csv"))
@click.option("--format", "fmt", type=click.Choice(["md", "latex", "csv"]), default="md",
              show_default=True)
@click.option("--results", type=PathParam(path_type=Path), multiple=True,
              help=f"record trees to read, later ones shadowing earlier ones' runs; your "
                   f"own runs (any tree but {COMMITTED}) get rows of their own, marked local "
                   f"(default: {COMMITTED} then {LOCAL}; with --readme {COMMITTED} alone)")
@_profile_option(default=None, help_extra=". Default: each cell shows the highest-ranked "
                                          "profile that has records")
@click.option("-o", "--output", type=PathParam(path_type=Path), default=None,
              help="write to this file instead of standard output")
@click.option("--readme", type=PathParam(path_type=Path, exists=True, dir_okay=False),
              default=None, help="write the markdown tables between the tables:begin and "
                                 "tables:end markers of this file (README.md)")
@_friendly
def table_cmd(fmt, results, profile, output, readme):
    """Print Tables 1-3 from the records: our mean +- std beside the paper's numbers."""
    from benchmark.readme import tables_text, with_block
    from benchmark.records import write_text_atomic
    from geogen.outpath import check_output_file
    if readme is not None and (output is not None or fmt != "md"):
        raise BenchmarkError("--readme writes markdown into that file: drop --output and "
                             "--format")
    for path, option in ((output, "-o"), (readme, "--readme")):
        if path is not None:
            check_output_file(path, option)  # before any record is read
    default = [COMMITTED] if readme is not None else [COMMITTED, LOCAL]
    text = tables_text(list(results) or default, fmt, profile,
                       warn=lambda line: click.echo(line, err=True), notes=readme is None)
    if readme is not None:
        write_text_atomic(readme, with_block(readme.read_text(), text, where=str(readme)))
        click.echo(f"wrote the tables into {readme}", err=True)
    elif output:
        write_text_atomic(output, text)
        click.echo(f"wrote {output}", err=True)
    else:
        click.echo(text, nl=False)


@main.command("records", epilog=_example("flowbench records -o docs/records.md"))
@click.option("--results", type=PathParam(path_type=Path), default=COMMITTED, show_default=True,
              help="the record tree to describe")
@click.option("-o", "--output", type=PathParam(path_type=Path), default=None,
              help="write to this file instead of standard output")
@_friendly
def records_cmd(results, output):
    """Each record's provenance as markdown (command, commit, machine, times, training,
    headline scores, checkpoint, notes), grouped by dataset, method and profile: the text of
    docs/records.md."""
    from benchmark.records import write_text_atomic
    from benchmark.records_doc import records_text
    from geogen.outpath import check_output_file
    if output is not None:
        check_output_file(output, "-o")  # before any record is read
    text = records_text(results, warn=lambda line: click.echo(line, err=True))
    if output is not None:
        write_text_atomic(output, text)
        click.echo(f"wrote {output}", err=True)
    else:
        click.echo(text, nl=False)


@main.command("show", epilog=_example(
    "flowbench show results/records/geo/flowcaps/gpu/seed0.json -o fig.png",
    "flowbench show checkpoints/flowcaps_geo_quick.pt -o fig.jpg --pairs 2",
    "flowbench show results/records/articulated/flowcaps/quick/seed0.json -o parts.png "
    "--kind parts"))
@click.argument("source", type=PathParam(path_type=Path))
@click.option("-o", "--output", type=PathParam(path_type=Path), required=True,
              help="the figure; its extension gives the type (.png, .jpg, ...)")
@click.option("--method", default="flowcaps", show_default=True, help="for a checkpoint SOURCE")
@click.option("--dataset", type=click.Choice(VARIANTS), default="geo", show_default=True,
              help="for a checkpoint SOURCE")
@click.option("--data", type=PathParam(path_type=Path), default=None,
              help="dataset folder (default: the record's, the profile's, or a few test pairs "
                   "made under runs/show-data)")
@click.option("--pairs", type=click.IntRange(1, 16), default=4, show_default=True,
              help="how many test pairs to draw (1-16), a block of rows each")
@click.option("--start", type=click.IntRange(0), default=0, show_default=True,
              help="first test pair shown")
@click.option("--kind", type=click.Choice(SHOW_KINDS), default="pairs", show_default=True,
              help="pairs: every map of each pair; parts: each capsule's mask on the parts in "
                   "the parts' colours (the paper's Exercise figure)")
@_friendly
def show_cmd(source, output, method, dataset, data, pairs, start, kind):
    """Draw I, I', flows, the warp, every capsule's masks (and a method's extra maps) for a few
    test pairs, or (--kind parts) each capsule's mask on the parts. SOURCE is a result record
    (.json) or a checkpoint."""
    from benchmark.show import show
    path = show(source, output, method_name=method, dataset=dataset, data=data, pairs=pairs,
                start=start, kind=kind, echo=click.echo)
    click.echo(f"wrote {path}")


@main.command("publish", epilog=_example(
    "flowbench publish runs/records/geo/flowcaps/quick/seed0.json --as checkpoints/mine.pt"))
@click.argument("record", type=PathParam(path_type=Path, exists=True, dir_okay=False))
@click.option("--as", "dest", type=PathParam(path_type=Path), required=True,
              help="checkpoints/<name>.pt: where the record's checkpoint goes")
@click.option("--force", is_flag=True, help="replace another checkpoint at that path")
@_friendly
def publish_cmd(record, dest, force):
    """Commit a run's checkpoint: copy it (and its training log) to checkpoints/, write its
    provenance and point RECORD at it by path and sha256."""
    from benchmark.publish import publish
    out = publish(record, dest, force)
    verb = "copied to" if out["copied"] else "already at"
    click.echo(f"checkpoint {verb} {out['checkpoint']}; provenance {out['provenance']}; "
               f"{out['record']} now names it")


@main.command("bench", epilog=_example("flowbench bench --method flowcaps --steps 20"))
@click.option("--method", "methods", multiple=True,
              help="a method to bench (repeatable) [default: every trained method]")
@click.option("--profile", type=click.Choice(["quick", "smoke"]), default="quick",
              show_default=True, help="each method's profile (smoke: the tests' tiny models)")
@click.option("--steps", type=click.IntRange(min=1), default=10, show_default=True,
              help="timed steps per row, after 3 warm-up steps")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="a setting changed from the profile, for the methods whose bench takes "
                   "settings (FlowCapsules: as `flowcaps train --set`)")
@click.option("--out", type=PathParam(path_type=Path), default=None,
              help="record to write [default: results/bench/<cpu>.json, e.g. intel-xeon]")
@_friendly
def bench_cmd(methods, profile, steps, sets, out):
    """FLOPs per training pair (forward and backward), pairs/s and the fraction of the CPU's
    float32 matmul peak reached, per method, with the CPU and its kernel flags named."""
    from benchmark import bench
    from benchmark.records import command_line, machine_info, write_json_atomic
    known = bench.benched()
    methods = methods or tuple(known)
    unknown = [m for m in methods if m not in known]
    if unknown:
        raise BenchmarkError(f"no bench for {', '.join(unknown)}; choose from "
                             f"{', '.join(known)}")
    record = bench.bench(methods, profile, steps, sets, echo=click.echo)
    record["command"] = command_line()
    out = out or Path("results/bench") / f"{bench.cpu_slug(machine_info('cpu')['cpu'])}.json"
    click.echo(f"wrote {write_json_atomic(out, record)}")


@main.command("list", epilog=_example("flowbench list"))
@_friendly
def list_cmd():
    """Methods (with their time budget per profile), datasets and profiles."""
    from benchmark.registry import load_methods
    click.echo("methods:")
    for name, m in load_methods().items():
        click.echo(f"  {name:16s} {m.title}")
        for p in profiles.visible():
            if p in m.budgets:
                click.echo(f"  {'':16s}   {p}: {m.budgets[p]}")
    click.echo("datasets:\n  " + "\n  ".join(VARIANTS))
    click.echo("profiles:")
    for name in profiles.visible():
        p = profiles.PROFILES[name]
        click.echo(f"  {name:8s} {p.train} train / {p.val} val / {p.test} test pairs at "
                   f"{p.size} px; {p.summary}")


def _add_method_commands() -> None:
    """Add the commands the registered methods define (a tool of one method lives beside its
    adapter, not in the core), with flowbench's one-line errors."""
    from benchmark.registry import load_methods
    for method in load_methods().values():
        for cmd in method.commands:
            if main.commands.get(cmd.name) is cmd:
                continue  # a subclass's method shares its parent's (flowcaps-refine)
            if cmd.name in main.commands:
                raise ValueError(f"method {method.name!r}: flowbench has a command "
                                 f"{cmd.name!r} already")
            cmd.callback = _friendly(cmd.callback)
            main.add_command(cmd)


_add_method_commands()


def program() -> None:
    """The `flowbench` command, and `python -m benchmark.cli` as torchrun's ranks run it:
    trainloop.ddp.run_program's rule, without importing torch for the commands that do not
    train (list, table)."""
    try:
        main()  # click's standalone mode always ends in SystemExit
    except SystemExit as stop:
        ddp = sys.modules.get("trainloop.ddp")  # imported by the commands that train
        if ddp is None:
            raise
        ddp.exit_program(stop.code)


if __name__ == "__main__":  # pragma: no cover
    program()
