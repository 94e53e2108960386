"""`flowbench`: run methods, print the paper's tables, run ablations, draw figures.

Bad input (unknown method, missing checkpoint, old records, empty results) ends with
a one-line message and a non-zero exit, never a traceback.
"""
from __future__ import annotations

import functools
import sys
from pathlib import Path

import click

from benchmark.errors import BenchmarkError
from geogen.errors import GeogenError
from geogen.schema import VARIANTS

DURATION = {"smoke": "about a minute", "quick": "about 30-40 minutes on a 2-core CPU",
            "long": "about 2.4 hours on a 2-core CPU",
            "gpu": "about 8-9 minutes on one GPU",
            "paper": "many hours; meant for a GPU"}


def _friendly(fn):
    """Turn project errors into click's one-line error and exit status 1."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (BenchmarkError, GeogenError) as err:
            raise click.ClickException(str(err)) from None
    return wrapper


def _seeds(text: str) -> tuple[int, ...]:
    try:
        seeds = tuple(int(s) for s in text.split(",") if s.strip())
    except ValueError:
        raise BenchmarkError(f"--seeds takes comma-separated integers, got {text!r}") from None
    if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise BenchmarkError(f"--seeds needs distinct non-negative integers, got {text!r}")
    return seeds


def _profile_option(fn):
    # A plain string, validated by the runner, so the tiny "smoke" profile stays unlisted.
    return click.option("--profile", default="quick", show_default=True,
                        help="quick (CPU, tens of minutes) or paper (GPU scale)")(fn)


@click.group()
def main() -> None:
    """FlowCapsules benchmark: runs, the paper's tables and figures."""


@main.command("run")
@click.argument("method")
@click.option("--dataset", type=click.Choice(VARIANTS), default="geo", show_default=True)
@_profile_option
@click.option("--seeds", default="0", show_default=True, help="e.g. 0,1,2 for mean +- std")
@click.option("--data", type=click.Path(path_type=Path), default=None,
              help="dataset folder (default data/<dataset>-<profile>; made if missing)")
@click.option("--results", type=click.Path(path_type=Path), default=Path("results"), show_default=True)
@click.option("--runs", type=click.Path(path_type=Path), default=Path("runs/flowbench"), show_default=True,
              help="training run folders (resumable)")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True)
@click.option("--checkpoint", type=click.Path(path_type=Path), default=None,
              help="evaluate this checkpoint instead of training")
@click.option("--force", is_flag=True, help="redo seeds whose record already exists, training from scratch")
@click.option("--test-limit", type=int, default=None, hidden=True)
@_friendly
def run_cmd(method, dataset, profile, seeds, data, results, runs, device, checkpoint, force,
            test_limit):
    """Make the data if missing, train METHOD (resuming), evaluate, write a record per seed."""
    from benchmark.runner import RunRequest, run
    req = RunRequest(method=method, dataset=dataset, profile=profile, seeds=_seeds(seeds),
                     data=data, results=results, runs=runs, device=device,
                     checkpoint=checkpoint, test_limit=test_limit, force=force)
    if checkpoint is None:
        click.echo(f"flowbench run {method} --dataset {dataset} --profile {profile}: "
                   f"{DURATION.get(profile, '')} per seed")
    run(req, echo=click.echo)


@main.command("ablate")
@click.option("--dataset", type=click.Choice(VARIANTS), default="geo", show_default=True)
@_profile_option
@click.option("--seeds", default="0", show_default=True)
@click.option("--data", type=click.Path(path_type=Path), default=None)
@click.option("--results", type=click.Path(path_type=Path), default=Path("results"), show_default=True)
@click.option("--runs", type=click.Path(path_type=Path), default=Path("runs/flowbench"), show_default=True)
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True)
@_friendly
def ablate_cmd(dataset, profile, seeds, data, results, runs, device):
    """Run Table 3's grid for FlowCapsules (K, |s|; decoder depth and depth ordering on Geo)."""
    from benchmark.runner import RunRequest, ablation_grid, run
    grid = ablation_grid(dataset)
    click.echo(f"{len(grid)} runs, {DURATION.get(profile, '')} each")
    for variant in grid:
        click.echo(f"== ablation {variant.tag() or 'default'}")
        run(RunRequest(method="flowcaps", dataset=dataset, profile=profile, seeds=_seeds(seeds),
                       data=data, results=results, runs=runs, device=device, variant=variant),
            echo=click.echo)


@main.command("table")
@click.option("--format", "fmt", type=click.Choice(["md", "latex", "csv"]), default="md", show_default=True)
@click.option("--results", type=click.Path(path_type=Path), default=Path("results"), show_default=True)
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help="write to this file instead of standard output")
@_friendly
def table_cmd(fmt, results, output):
    """Print Tables 1-3 from the records: our mean +- std beside the paper's numbers."""
    from benchmark.records import load_records, write_text_atomic
    from benchmark.tables import RENDERERS, build_tables
    records, problems = load_records(results)
    for p in problems:
        click.echo(f"skipped: {p}", err=True)
    text = RENDERERS[fmt](build_tables(records))
    if output:
        write_text_atomic(output, text)
        click.echo(f"wrote {output}", err=True)
    else:
        click.echo(text, nl=False)


@main.command("show")
@click.argument("source", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True)
@click.option("--method", default="flowcaps", show_default=True, help="for a checkpoint SOURCE")
@click.option("--data", type=click.Path(path_type=Path), default=None,
              help="dataset folder (default: the record's, or data/geo-quick)")
@click.option("--pairs", type=click.IntRange(1, 16), default=4, show_default=True)
@click.option("--start", type=click.IntRange(0), default=0, show_default=True,
              help="first test pair shown")
@_friendly
def show_cmd(source, output, method, data, pairs, start):
    """Draw I, I', flows, the warp and every capsule's masks for a few test pairs.

    SOURCE is a result record (.json) or a checkpoint.
    """
    from benchmark.figures import qualitative_figure, save_png
    from benchmark.records import read_record
    from benchmark.registry import get_method
    from benchmark.runner import default_data_root, read_checked
    if not source.is_file():
        raise BenchmarkError(f"{source} does not exist")
    if source.suffix == ".json":
        rec = read_record(source)
        method, checkpoint = rec["method"], Path(rec["checkpoint"] or "")
        data = data or Path(rec["data"]["root"])
    else:
        checkpoint = source
        data = data or default_data_root("geo", "quick")
    m = get_method(method)
    loaded = m.load(checkpoint)
    test = read_checked(data, "test", ("frames", "flow"), start + pairs)
    frames, flows = test["frames"][start:], test["flow"][start:, 0]
    if len(frames) == 0:
        raise BenchmarkError(f"{data} has fewer than {start + 1} test pairs")
    if frames.shape[2] != loaded.image_size:
        raise BenchmarkError(f"the checkpoint expects {loaded.image_size} px but {data} holds "
                             f"{frames.shape[2]} px")
    fig = qualitative_figure(m, loaded.model, frames, flows,
                             f"{m.title}: {checkpoint.name} on {data} test {start}-{start + len(frames) - 1}")
    click.echo(f"wrote {save_png(fig, output)}")


@main.command("diagnose")
@click.argument("checkpoint", type=click.Path(path_type=Path))
@click.option("--data", type=click.Path(path_type=Path), default=None,
              help="dataset folder (default data/geo-quick)")
@click.option("--pairs", type=click.IntRange(1), default=200, show_default=True,
              help="first N test pairs (frame 0)")
@click.option("--probe", type=click.Choice(["dupes", "owners", "oracle", "all"]), default="all",
              show_default=True)
@click.option("--oracle-steps", type=click.IntRange(1), default=300, hidden=True)
@_friendly
def diagnose_cmd(checkpoint, data, pairs, probe, oracle_steps):
    """Probe a FlowCapsules checkpoint: duplicate capsules, who shows each class, a pose oracle."""
    from benchmark.diagnose import PROBES, diagnose, read_pairs, report
    from benchmark.registry import get_method
    from benchmark.runner import default_data_root
    data = data or default_data_root("geo", "quick")
    loaded = get_method("flowcaps").load(checkpoint)
    test = read_pairs(data, pairs)
    if test.images.shape[-1] != loaded.image_size:
        raise BenchmarkError(f"the checkpoint expects {loaded.image_size} px but {data} holds "
                             f"{test.images.shape[-1]} px")
    click.echo(f"{checkpoint}: first {len(test.images)} test pairs of {data}")
    probes = PROBES if probe == "all" else (probe,)
    click.echo(report(diagnose(loaded.model, test, probes, oracle_steps=oracle_steps)))


@main.command("list")
def list_cmd():
    """Methods, datasets and profiles."""
    from benchmark.registry import PROFILES, load_methods
    from benchmark.runner import DATA_PROFILES
    click.echo("methods:")
    for name, m in sorted(load_methods().items()):
        click.echo(f"  {name:10s} {m.title}")
    click.echo("datasets:\n  " + "\n  ".join(VARIANTS))
    click.echo("profiles:")
    for p in PROFILES:
        d = DATA_PROFILES[p]
        click.echo(f"  {p:10s} {d.n} train / {d.val} val / {d.test} test pairs at {d.size} px; "
                   f"{DURATION[p]}")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
