"""The `geogen` command: make, import-psd, info, verify, show. Bad input is one line and exit
status 1."""
from __future__ import annotations

import functools
import sys
import threading
from pathlib import Path

import click
import numpy as np

from geogen import schema, shards
from geogen.errors import GeogenError
from geogen.outpath import PathParam
from geogen.scene import MOTIONS
from geogen.stopping import exit_status, signals_stop
from geogen.variants import REGISTRY as VARIANTS

MAX_INDICES = 100_000  # --index expands to at most this many numbers (a sheet holds far fewer)


def _friendly(fn):
    """Turn GeogenError into click's one-line 'Error: ...' and a non-zero exit."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except GeogenError as err:
            raise click.ClickException(str(err)) from None
    return wrapper


def _workers(value: str) -> int:
    """'auto' -> 0 (MakeConfig's one per core), or a positive number of processes."""
    if value == "auto":
        return 0
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise GeogenError(f"--workers must be a positive integer or 'auto', got {value!r}")
    return n


def default_out(variant: str) -> str:
    """make's output folder when --out is not given: data/geo, data/geoplus, ..."""
    return f"data/{variant.replace('+', 'plus')}"


def parse_indices(text: str) -> list[int]:
    """'0-7' (inclusive), '3' or '0,2,5-6' -> indices."""
    out: list[int] = []
    try:
        for part in text.split(","):
            if "-" in part.strip()[1:]:
                a, b = part.split("-", 1)
                if int(b) - int(a) + 1 + len(out) > MAX_INDICES:
                    raise GeogenError(f"--index {text!r} names more than {MAX_INDICES} samples")
                out += list(range(int(a), int(b) + 1))
            else:
                out.append(int(part))
    except ValueError:
        raise GeogenError(f"--index must look like 0-7 or 0,2,5, got {text!r}") from None
    if not out:
        raise GeogenError(f"--index {text!r} names no sample")
    return out


@click.group()
def main():
    """Geo / Geo+ / articulated dataset generator (see geogen/schema.py for the data contract)."""


@main.command(epilog="\b\nExample:\n  geogen make --variant geo --n 1000 --val 100 --test 100 "
                     "--size 64 --out data/mine")
@click.option("--variant", type=click.Choice(sorted(VARIANTS)), default="geo", show_default=True,
              help="dataset variant")
@click.option("--n", "n", type=int, required=True, help="training samples")
@click.option("--val", type=int, default=None, help="validation samples [N/100]")
@click.option("--test", type=int, default=None, help="test samples [N/10]")
@click.option("--size", type=int, default=64, show_default=True, help="image side, 32..512")
@click.option("--frames", type=int, default=2, show_default=True, help="frames per clip")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--out", type=PathParam(), default=None,
              help="output folder [data/geo for geo, data/geoplus for geo+]")
@click.option("--workers", default="auto", show_default=True,
              help="processes (>= 1), or 'auto' for one per core")
@click.option("--shard-size", type=int, default=10000, show_default=True)
@click.option("--supersample", type=int, default=5, show_default=True,
              help="per-axis subsamples at shape edges (odd: no pixel is exactly half covered)")
@click.option("--motion", type=click.Choice(MOTIONS), default="translation", show_default=True,
              help="translation (the paper's) or conformal (adds rotation and scaling)")
@click.option("--backgrounds", default=None, metavar="DIR",
              help="geo+, articulated+: folder of background images [bundled photographs]")
@click.option("--textures", default=None, metavar="DIR",
              help="geo+, articulated+: folder of texture images [bundled textures]")
@click.option("--look", type=click.Choice(schema.LOOKS), default=schema.DEFAULT_LOOK,
              show_default=True,
              help="geo+, articulated+: paper (greyscale Brodatz-style textures, as the paper) or "
                   "camouflage (tinted, with crops of the background photos: harder)")
@click.option("--max-images", type=int, default=500, show_default=True,
              help="geo+, articulated+: use at most this many images of each folder (evenly spaced)")
@click.option("--skip-bad-images", is_flag=True,
              help="geo+, articulated+: leave out images that do not decode, and backgrounds smaller than "
                   "--size, instead of stopping (named in the manifest)")
@click.option("--resume", is_flag=True, help="finish an interrupted run with the same settings")
@click.option("--force", is_flag=True, help="replace the data already in --out")
@click.option("--part", default=None, metavar="I/N",
              help="make only part I of N (one per machine, the same --out on a shared disk); "
                   "`geogen merge OUT` writes the manifest once all are made")
@click.option("--quiet", is_flag=True, help="no progress bar")
@_friendly
def make(variant, n, val, test, size, frames, seed, out, workers, shard_size, supersample,
         motion, backgrounds, textures, look, max_images, skip_bad_images, resume, force, part,
         quiet):
    """Make a dataset: OUT/{train,val,test}/shard-NNNNN.h5 and OUT/manifest.json.

    Ctrl-C (exit status 130) or SIGTERM (143) stops it, keeping the whole shards; the same
    command with --resume finishes it."""
    from geogen.make import MakeConfig, make_dataset, validate
    from geogen.outpath import check_output_folder
    from geogen.parts import parse_part
    part = parse_part(part) if part is not None else None
    # --out '' (an unset variable) is refused, never taken for the default.
    config = MakeConfig(variant=variant, n=n, val=val, test=test, size=size, frames=frames,
                        seed=seed, out=default_out(variant) if out is None else out,
                        workers=_workers(workers), shard_size=shard_size,
                        supersample=supersample, motion=motion, backgrounds=backgrounds,
                        textures=textures, look=look, max_images=max_images,
                        skip_bad_images=skip_bad_images)
    validate(config)  # before any file exists (make_dataset checks it again)
    check_output_folder(config.out, "--out")
    stop, received = threading.Event(), []
    try:
        with signals_stop(stop, received):
            root = make_dataset(config, resume=resume, force=force, progress=not quiet,
                                stop=stop, part=part)
    except KeyboardInterrupt:
        how, status = exit_status(received)
        click.echo(f"{how}; the whole shards in {config.out} are kept: run the same command "
                   f"with --resume to finish", err=True)
        sys.exit(status)
    if part is not None:
        click.echo(f"wrote part {part} of {root}; once every part is made: geogen merge {root}")
        return
    skipped = {kind: len(entry.get("skipped", ())) for kind, entry
               in shards.read_manifest(root).get("sources", {}).items() if isinstance(entry, dict)}
    left_out = "; ".join(f"skipped {n} unusable {kind.rstrip('s')} image{'s' * (n > 1)}"
                         for kind, n in skipped.items() if n)
    click.echo(f"wrote {root} ({', '.join(f'{k} {v}' for k, v in config.counts().items())})"
               + (f"; {left_out} (named in its manifest.json)" if left_out else ""))


@main.command(epilog="\b\nExample:\n  geogen merge data/geo-big")
@click.argument("out", type=PathParam(file_okay=False))
@_friendly
def merge(out):
    """Write OUT's manifest once every part of `geogen make --part I/N` is made; the result is
    the folder a one-part run makes."""
    from geogen.merge import merge_dataset
    from geogen.outpath import check_output_folder
    root = merge_dataset(check_output_folder(out, "OUT"))
    counts = shards.read_manifest(root)["counts"]
    click.echo(f"wrote {root / shards.MANIFEST} ({', '.join(f'{k} {v}' for k, v in counts.items())})")


@main.command("import-psd",
              epilog="\b\nExample:\n  geogen import-psd psd_pairs/ --out data/psd-test")
@click.argument("src", type=PathParam())
@click.option("--out", "out", type=PathParam(), required=True, help="output folder (missing or empty)")
@click.option("--split", default="test", show_default=True, help="split that gets every sample")
@click.option("--no-masks", is_flag=True, help="store frames and flow only")
@click.option("--shard-size", type=int, default=10000, show_default=True)
@_friendly
def import_psd(src, out, split, no_masks, shard_size):
    """Convert a folder in PSD's format ({i}_im1.png, {i}_im2.png, {i}_f.npy) into shards."""
    from geogen.outpath import check_output_folder
    from geogen.psd_import import write_psd_shards
    check_output_folder(out, "--out")
    root, info = write_psd_shards(src, out, split=split, masks=not no_masks,
                                  shard_size=shard_size)
    click.echo(f"wrote {root} ({split} {info['count']}; skipped {len(info['skipped'])}; "
               f"absent fields: {', '.join(info['absent']) or 'none'})")


@main.command(epilog="\b\nExample:\n  geogen info data/geo-quick")
@click.argument("root", type=PathParam(file_okay=False))
@_friendly
def info(root):
    """Counts, class balance, schema and sizes on disk of a generated folder."""
    from geogen.dataset import open_split
    parts = [open_split(root, split) for split in schema.SPLITS]
    for part in parts:  # the whole folder is checked before anything is printed
        part.check()
    m = parts[0].manifest
    labels = {p.name: p.read(("label",))["label"] for p in parts}
    sizes = _field_bytes(parts)
    classes, slots = schema.classes_of(m), schema.slots_of(m)
    click.echo(f"{root}: variant {m.get('variant')}, size {parts[0].size}, frames "
               f"{parts[0].frames}, seed {m.get('seed')}, generator {m.get('generator_version')}")
    if slots != schema.SLOTS:
        click.echo(f"slots ({len(slots)}): {', '.join(slots)}")
    click.echo("split   samples  class balance (" + ", ".join(classes) + ")  on disk")
    for part in parts:
        freq = np.bincount(labels[part.name], minlength=len(classes)) / max(1, part.count)
        disk = sum(path.stat().st_size for path, _ in part.shards)
        click.echo(f"{part.name:6s} {part.count:8d}  " + " ".join(f"{f:.3f}" for f in freq)
                   + f"  {disk / 1e6:.1f} MB")
    click.echo("field     dtype    per-sample shape  on disk  meaning")
    for name, stored in sizes.items():
        spec = schema.FIELDS[name]
        shape = schema.sample_shape(name, parts[0].frames, parts[0].size, len(slots))
        click.echo(f"{name:9s} {str(spec.dtype):8s} {str(shape):17s} "
                   f"{stored / 1e6:6.1f} MB  {spec.doc}")


def _field_bytes(parts) -> dict[str, int]:
    """Stored (compressed) bytes of each field over the splits `parts` (checked Splits)."""
    total = {name: 0 for name in parts[0].fields}
    for part in parts:
        for path, _ in part.shards:
            with shards.open_shard(path) as f:
                for name in total:
                    total[name] += f[name].id.get_storage_size()
    return total


@main.command(epilog="\b\nExample:\n  geogen verify data/geo-quick")
@click.argument("root", type=PathParam(file_okay=False))
@click.option("--no-checksums", is_flag=True,
              help="skip the sha256 of each shard (against the manifest and its sidecar)")
@_friendly
def verify(root, no_checksums):
    """Check checksums, attributes, schema, counts and every value against the manifest and
    the data contract (geogen/schema.py); exit 1 on any mismatch."""
    problems = shards.verify(root, checksums=not no_checksums)
    if problems:
        for p in problems[:-1]:
            click.echo(p, err=True)
        raise GeogenError(f"{len(problems)} problem(s); last: {problems[-1]}")
    m = shards.read_manifest(root)
    n = sum(len(v) for v in m["shards"].values())
    click.echo(f"{root}: OK ({n} shards, {sum(m['counts'].values())} samples)")


@main.command(epilog="\b\nExample:\n  geogen show data/geo-quick --index 0-7 -o sheet.png")
@click.argument("root", type=PathParam(file_okay=False))
@click.option("--split", default="test", show_default=True)
@click.option("--index", "index", default="0-7", show_default=True, help="e.g. 0-7 or 0,3,5")
@click.option("-o", "--out", "out", type=PathParam(), default="sheet.png", show_default=True,
              help="the image; its extension gives the type (.png, .jpg, ...)")
@_friendly
def show(root, split, index, out):
    """Write a contact sheet: one row per sample, in blocks side by side past 4096 px."""
    from geogen.outpath import check_output_file
    from geogen.sheet import contact_sheet, image_format, legend
    image_format(out)  # an unknown extension is refused before any data is read
    check_output_file(out, "-o")
    sheet = contact_sheet(Path(root), split, parse_indices(index), out)
    click.echo(f"wrote {sheet.path}; {legend(sheet.max_flow, sheet.slots)}")


if __name__ == "__main__":  # `python -m geogen.cli`, as on a machine without the console scripts
    main()
