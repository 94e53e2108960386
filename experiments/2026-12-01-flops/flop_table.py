"""FLOPs per training pair of the quick profile and its encoder and decoder variants.

One rank's step (batch 16, eager, float32) as `flowbench bench` counts it: forward and
backward in total, the encoder's and the decoder's forward. Writes flop_table.md beside it.

    .venv/bin/python experiments/2026-12-01-flops/flop_table.py
"""
from pathlib import Path

from benchmark.bench import SUBJECTS, count_flops

VARIANTS = {  # name: the --set changes
    "control (quick)": {},
    "enc_stem=strided": {"model.enc_stem": "strided"},
    "enc_stem=space_to_depth": {"model.enc_stem": "space_to_depth"},
    "enc_channels=[16,32,64,64]": {"model.enc_channels": (16, 32, 64, 64)},
    "dec_depth=2": {"model.dec_depth": 2},
    "points=128": {"points": 128},
    "strided + dec_depth=2 (A)": {"model.enc_stem": "strided", "model.dec_depth": 2},
    "strided + [16,32,64,64] + dec_depth=2 (B)": {
        "model.enc_stem": "strided", "model.enc_channels": (16, 32, 64, 64), "model.dec_depth": 2},
    "space_to_depth + dec_depth=2 (C)": {"model.enc_stem": "space_to_depth", "model.dec_depth": 2},
    "strided + [32,32,48,64] + dec_depth=2": {
        "model.enc_stem": "strided", "model.enc_channels": (32, 32, 48, 64), "model.dec_depth": 2},
}


def changes_of(sets: dict) -> dict:
    out: dict = {}
    for key, value in sets.items():
        if key.startswith("model."):
            out.setdefault("model", {})[key[len("model."):]] = value
        else:
            out[key] = value
    return out


def main() -> None:
    rows = ["| variant | MFLOP/pair (fwd + bwd) | of control | encoder fwd | decoder fwd |",
            "|---|---|---|---|---|"]
    control = None
    for name, sets in VARIANTS.items():
        sub = SUBJECTS["flowcaps"]("quick", **changes_of(sets))
        total, per = count_flops(sub)
        n = len(sub.rows[0])
        mflop = total / n / 1e6
        control = control or mflop
        enc = per["_LossModule.model.encoder"] / n / 1e6
        dec = per["_LossModule.model.decoder"] / n / 1e6
        rows.append(f"| {name} | {mflop:.1f} | {mflop / control:.2f} | {enc:.1f} | {dec:.1f} |")
    text = "\n".join(rows) + "\n"
    out = Path(__file__).with_name("flop_table.md")
    tmp = out.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(out)
    print(text, end="")


if __name__ == "__main__":
    main()
