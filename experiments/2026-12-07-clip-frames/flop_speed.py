"""Needs commit 98f23c3 (the `clip_frames` switch, removed since; see README.md).

FLOPs per training pair and one thread's pairs/s of the quick profile's step on clips.

usage: python flop_speed.py flops | eager T,T,... | trained T,T,...
`flops` counts one rank's step (batch 16 pairs, float32, eager) for T = 2, 3, 5, 9 and with
`model.dec_depth=2`; `eager`/`trained` time 20 steps after 3 warm-up steps (`trained`: compiled,
as the profile trains, bf16 off) on one thread. Set ATEN_CPU_CAPABILITY=avx2
ONEDNN_MAX_CPU_ISA=AVX2 OMP_NUM_THREADS=1 for the AVX2 stand-in.
"""
import sys

from benchmark.bench import SUBJECTS, count_flops, time_steps


def flops() -> None:
    print("| T | model | MFLOP/pair (fwd + bwd) | of T = 2 | encoder fwd | decoder fwd |")
    print("|---|---|---|---|---|---|")
    base = None
    for t, extra in [(2, {}), (3, {}), (5, {}), (9, {}), (5, {"dec_depth": 2}),
                     (9, {"dec_depth": 2})]:
        sub = SUBJECTS["flowcaps"]("quick", clip_frames=t, model=extra)
        total, per = count_flops(sub)
        pairs = len(sub.rows[0]) * (t - 1)
        enc = sum(v for k, v in per.items() if k.endswith("model.encoder")) / pairs / 1e6
        dec = sum(v for k, v in per.items() if k.endswith("model.decoder")) / pairs / 1e6
        mflop = total / pairs / 1e6
        base = base or mflop
        print(f"| {t} | {extra or 'quick'} | {mflop:.1f} | {mflop / base:.2f} | {enc:.1f} | {dec:.1f} |",
              flush=True)


def speed(trained: bool, ts: list[int]) -> None:
    for t in ts:
        sub = SUBJECTS["flowcaps"]("quick", as_trained=trained, clip_frames=t, bf16=False)
        r = time_steps(sub, 20)
        print(f"T = {t}: {r['rows_per_s'] * (t - 1):.1f} pairs/s (step {r['step_ms']:.1f} ms, "
              f"warm-up {r['warmup_s']:.0f} s)", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "flops":
        flops()
    else:
        speed(sys.argv[1] == "trained", [int(x) for x in sys.argv[2].split(",")])
