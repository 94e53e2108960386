"""Two training logs side by side: the mean loss terms in windows of training pairs.

The sampled-point losses are importance-weighted, unbiased estimates of the same full-grid
objective whatever the sampling density, so two runs' logged losses compare directly.

    python loss_by_pairs.py CONTROL.log.csv RUN.log.csv [--window 20000]
"""
from __future__ import annotations

import csv

import click


def _rows(path: str) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _mean(rows: list[dict[str, str]], lo: int, hi: int, key: str) -> float:
    vals = [float(r[key]) for r in rows if lo <= int(r["pairs"]) < hi]
    return sum(vals) / len(vals) if vals else float("nan")


@click.command()
@click.argument("control")
@click.argument("run")
@click.option("--window", default=20000, show_default=True)
def main(control: str, run: str, window: int) -> None:
    a, b = _rows(control), _rows(run)
    end = min(int(a[-1]["pairs"]), int(b[-1]["pairs"]))
    click.echo("pairs from | loss control / run | render | appearance")
    for lo in range(0, end, window):
        cells = [f"{_mean(a, lo, lo + window, k):.4f} / {_mean(b, lo, lo + window, k):.4f}"
                 for k in ("loss", "render", "appearance")]
        click.echo(f"{lo} | " + " | ".join(cells))


if __name__ == "__main__":
    main()
