"""The `flowcaps` command: train a model on a geogen dataset, or describe a checkpoint."""
from __future__ import annotations

import dataclasses
import json
import os
import sys

import click

from flowcaps import checkpoint, launch
from geogen.outpath import PathParam
from geogen.stopping import INTERRUPTED
from trainloop import ddp
from trainloop.configs import parse_text, route
from trainloop.rendezvous import Rendezvous
from flowcaps.config import RENAMED, TrainConfig
from flowcaps.errors import FlowcapsError, TrainingInterrupted
from flowcaps.profiles import MIX_WITH, PROFILES, for_data
from flowcaps.trainer import train as run_train


def parse_set(items: tuple[str, ...]) -> dict:
    """`--set key=value` pairs; values are JSON (numbers, true/false, null, lists), or the text
    itself for a string field. `model.key=value` changes a ModelConfig field, `loop.key=value`
    (or the loop field's bare name, `seed=1`) the loop's."""
    changes: dict = {}
    for item in items:
        if "=" not in item:
            raise FlowcapsError(f"--set expects key=value, got {item!r}")
        key, text = item.split("=", 1)
        key = RENAMED.get(key, key)
        changes[key] = parse_text(TrainConfig, key, text)
    return route(TrainConfig, changes)


def _data_kind(data: str) -> tuple[str, int]:
    """The variant and image side that DATA's manifest names, or a one-line error."""
    from geogen import shards
    from geogen.errors import GeogenError
    if not os.path.isfile(os.path.join(data, "manifest.json")):
        raise FlowcapsError(f"{data} is not a geogen dataset (no manifest.json)")
    try:
        manifest = shards.read_manifest(data)
        return str(manifest["variant"]), int(manifest["size"])
    except (GeogenError, KeyError, TypeError, ValueError) as err:
        raise FlowcapsError(f"cannot read the manifest of {data}: {err}") from None


def _profile_config(data: str, profile: str, changes: dict) -> TrainConfig:
    """The profile for DATA's variant and image side (what `flowbench run` trains on such
    data), then the changes; those are checked first, so a bad option is named before bad data."""
    PROFILES[profile]().replace(**changes)
    variant, size = _data_kind(data)
    cfg = for_data(profile, variant, image_size=size).replace(**changes)
    want = MIX_WITH.get(variant)
    if want is not None and cfg.mix_data is None and cfg.mix_first > 0:
        raise FlowcapsError(f"{data} is {variant} data, whose recipe also trains on {want} "
                            f"training pairs: pass --mix-data DIR")
    if want is not None and cfg.mix_data is not None:
        got = _data_kind(cfg.mix_data)[0]
        if got != want:
            raise FlowcapsError(f"--mix-data {cfg.mix_data} holds {got} data; {variant} data's "
                                f"recipe mixes in {want} data")
    return cfg


def _read_config(path: str) -> TrainConfig:
    try:
        text = open(path).read()
    except OSError as err:
        raise FlowcapsError(f"cannot read config {path}: {err.strerror}") from None
    return TrainConfig.from_json(text)


@click.group()
def main() -> None:
    """FlowCapsules: self-supervised part capsules from frame pairs."""


@main.command(epilog="\b\nExample:\n  flowcaps train data/geo-quick --profile quick "
                     "--out runs/mine --pairs 100000")
@click.argument("data", type=PathParam())
@click.option("--profile", type=click.Choice(list(PROFILES)), default=None,
              help="named settings to start from, with DATA's variant's changes (as flowbench "
                   "trains them) [default: quick]; not with --config")
@click.option("--out", type=PathParam(), default=None,
              help="run folder (checkpoint, log.csv, model.pt) [default: the profile's, "
                   "runs/flowcaps-PROFILE; with --config, the file's out]")
@click.option("--device", type=click.Choice(["cpu", "cuda", "auto"]), default=None,
              help="[default: auto: cuda when torch sees a GPU, else cpu]")
@click.option("--epochs", type=int, default=None)
@click.option("--batch-size", type=int, default=None)
@click.option("--lr", type=float, default=None)
@click.option("--pairs", type=int, default=None,
              help="the budget: training pairs to see, all ranks together (the schedules "
                   "follow it) [default: the profile's]")
@click.option("--max-minutes", type=float, default=None,
              help="a time guard, not a budget: past this many minutes of training the run "
                   "saves its checkpoint and stops with an error (no model)")
@click.option("--max-pairs", type=int, default=None, help="use only the first N training pairs")
@click.option("--seed", type=int, default=None)
@click.option("--mix-data", type=PathParam(), default=None,
              help="a second dataset whose training pairs join DATA's (geo+ data's recipe needs "
                   "a geo dataset here)")
@click.option("--init", type=PathParam(), default=None,
              help="start from this checkpoint's weights (a fine-tune; optimizer and schedules afresh)")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="any TrainConfig field, or model.FIELD for the model (repeatable)")
@click.option("--config", "config_file", type=PathParam(), default=None,
              help="a TrainConfig JSON file to start from, instead of a --profile")
@click.option("--force", is_flag=True,
              help="train afresh: remove the run's files in --out (its checkpoint, log and "
                   "model) instead of resuming")
@click.option("--nnodes", type=int, default=1, show_default=True,
              help="nodes of one training: each runs this same command (torchrun's rendezvous; "
                   "docs/cluster.md)")
@click.option("--rdzv-endpoint", default=None, metavar="HOST:PORT",
              help="where the nodes meet (torchrun's c10d rendezvous), with --nnodes 2 or more")
@click.option("--rdzv-id", default="none", show_default=True,
              help="the training's name at the endpoint (torchrun's --rdzv-id)")
@click.option("--node-rank", type=int, default=None,
              help="this node's number, passed to torchrun (c10d numbers the nodes itself); "
                   "the messages name the nodes by it")
@click.option("--rdzv-timeout", type=int, default=None, metavar="SECONDS",
              help="how long a node waits for the others to join, 1..86400 (torchrun's "
                   "join_timeout) [default: 600]")
@click.option("--max-restarts", type=int, default=0, show_default=True,
              help="times torchrun starts the ranks again after a failure, 0..100 (each "
                   "restart resumes from the checkpoint)")
@click.option("--quiet", is_flag=True, help="no progress bar")
def train(data, profile, out, device, epochs, batch_size, lr, pairs, max_minutes, max_pairs, seed,
          mix_data, init, sets, config_file, force, nnodes, rdzv_endpoint, rdzv_id, node_rank,
          rdzv_timeout, max_restarts, quiet) -> None:
    """Train on the DATA geogen dataset; resumes when --out holds a checkpoint.

    Settings come from --profile (with what DATA's variant changes, as `flowbench run` trains
    it) or --config, then the options, then --set; all of them, the data, --out and --init are
    checked before training (or its processes) starts."""
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        ddp.defer_interrupts()  # from the start: a Ctrl-C while a rank loads data stops it too
    try:
        if profile is not None and config_file is not None:
            raise FlowcapsError("--profile and --config both give the settings; pass one")
        flags = {"out": out, "device": device, "epochs": epochs, "batch_size": batch_size,
                 "lr": lr, "rows": pairs, "max_minutes": max_minutes, "max_pairs": max_pairs,
                 "seed": seed,
                 "mix_data": mix_data, "init": init}
        changes = route(TrainConfig, {k: v for k, v in flags.items() if v is not None})
        for key, value in parse_set(sets).items():
            both = isinstance(value, dict) and isinstance(changes.get(key), dict)
            changes[key] = {**changes[key], **value} if both else value
        loop = changes.get("loop")
        if isinstance(loop, dict) and "epochs" in loop and "rows" not in loop:
            loop["rows"] = None  # epochs asked for by name: they are the budget, not pairs
        cfg = (_profile_config(data, profile or "quick", changes) if config_file is None
               else _read_config(config_file).replace(**changes))
        rdzv = Rendezvous(nnodes=nnodes, node_rank=node_rank, endpoint=rdzv_endpoint,
                          run_id=rdzv_id, join_timeout=rdzv_timeout, max_restarts=max_restarts)
        path = run_train(cfg, data, progress=not quiet, force=force, rendezvous=rdzv)
    except TrainingInterrupted as err:
        if "WORLD_SIZE" in os.environ:  # a rank of flowcaps.launch, which reports it: exit 0
            sys.exit(0)                     # so that torchrun ends without an error report
        click.echo(f"Error: {err}", err=True)
        sys.exit(INTERRUPTED)
    except FlowcapsError as err:
        if launch.report_to_parent(str(err)):  # a rank: the launcher prints it, once
            sys.exit(1)
        raise click.ClickException(str(err)) from None
    finally:
        ddp.leave()
    if os.environ.get("RANK", "0") == "0":  # under torchrun only rank 0 reports
        click.echo(f"model written to {path}: {_trained(path)}")


def _trained(path) -> str:
    """What the run trained, from the model's meta: steps, minutes and what stopped it."""
    meta = checkpoint.meta_of(checkpoint.read(path))
    limit = {"epochs": "epoch count", "steps": "step count",
             "rows": "pair budget"}.get(meta.get("stop_reason"),
             meta.get("stop_reason"))
    return (f"{meta.get('step')} steps ({meta.get('pairs')} pairs) in "
            f"{meta.get('train_seconds', 0.0) / 60:.1f} min of training, stopped by its {limit}")


@main.command(epilog="\b\nExample:\n  flowcaps info checkpoints/flowcaps_geo_quick.pt")
@click.argument("ckpt", type=PathParam())
def info(ckpt) -> None:
    """Print a checkpoint's config (in today's form, whatever form it was stored in) and
    training record."""
    try:
        blob = checkpoint.read(ckpt)
        config = dataclasses.asdict(checkpoint.config_of(blob))
    except FlowcapsError as err:
        raise click.ClickException(str(err)) from None
    click.echo(json.dumps({"config": config, "meta": checkpoint.meta_of(blob)}, indent=2))


def program() -> None:
    """The `flowcaps` command, and `python -m flowcaps.cli` as flowcaps.launch starts the ranks."""
    ddp.run_program(main)


if __name__ == "__main__":
    program()
