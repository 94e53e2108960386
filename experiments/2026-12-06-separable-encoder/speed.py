"""FLOPs and training speed of one quick-profile FlowCapsules rank (one thread, float32) for the
control and the variants below, alternating in one process so that all see the same load.

    python experiments/2026-12-06-separable-encoder/speed.py eager|trained [ROUNDS] [STEPS]

Set ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 for the AVX2 stand-in; `trained` compiles
as the profile trains. The allocator thresholds are set as in the training processes.
`model.enc_separable` has been removed since: check out commit ff4c624 to run this.
"""
import statistics
import sys
import time

import torch

from benchmark.bench import SUBJECTS, TrainStep, count_flops
from trainloop.allocator import keep_freed_memory

VARIANTS = {"control": {"bf16": False},
            "separable": {"bf16": False, "model": {"enc_separable": True}},
            "separable+dec2": {"bf16": False, "model": {"enc_separable": True, "dec_depth": 2}}}


def main() -> None:
    as_trained = sys.argv[1] == "trained"
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    torch.set_num_threads(1)
    torch.set_flush_denormal(True)
    keep_freed_memory()
    subs = {k: SUBJECTS["flowcaps"]("quick", as_trained=as_trained, **v) for k, v in VARIANTS.items()}
    base = None
    for k, v in VARIANTS.items():
        total, per = count_flops(SUBJECTS["flowcaps"]("quick", **v), depth=2)
        n = len(subs[k].rows[0])
        base = base or total
        enc = sum(f for name, f in per.items() if name.endswith("encoder"))
        print(f"{k}: {total / n / 1e6:.1f} MFLOP/pair fwd+bwd ({total / base:.2f} of control); "
              f"encoder fwd {enc / n / 1e6:.1f}", flush=True)
    steppers = {k: (TrainStep(s), len(s.rows[0])) for k, s in subs.items()}
    for step, _ in steppers.values():
        for _ in range(3):  # warm-up (and compile)
            step()
    rates: dict = {k: [] for k in steppers}
    for r in range(rounds):
        for k, (step, batch) in steppers.items():
            t = time.perf_counter()
            for _ in range(steps):
                step()
            rates[k].append(batch * steps / (time.perf_counter() - t))
        print(f"round {r}: " + ", ".join(f"{k} {v[-1]:.1f}" for k, v in rates.items()) + " pairs/s",
              flush=True)
    for k in rates:
        ratio = statistics.median(a / c for a, c in zip(rates[k], rates["control"]))
        print(f"{'compiled' if as_trained else 'eager'}, torch {torch.backends.cpu.get_cpu_capability()}: "
              f"median {k} / control {ratio:.2f}")


if __name__ == "__main__":
    main()
