"""Training speed of one quick-profile FlowCapsules rank (one thread) for the control and the
narrow encoder, the two alternating in one process so that both see the same load.

    python experiments/2026-12-05-narrow-encoder/speed.py eager|trained [ROUNDS] [STEPS]

Set ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 for the AVX2 stand-in (float32 there);
`trained` compiles as the profile trains. Prints pairs/s per round and the median ratio.
"""
import statistics
import sys
import time

import torch

from benchmark.bench import SUBJECTS, TrainStep

# float32 in both: the precision of the CPUs without AVX-512 this is for
VARIANTS = {"control": {"bf16": False},
            "narrow": {"bf16": False, "model": {"enc_channels": (16, 16, 64, 64), "dec_depth": 2}}}


def stepper(as_trained: bool, changes: dict) -> tuple[TrainStep, int]:
    sub = SUBJECTS["flowcaps"]("quick", as_trained=as_trained, **changes)
    return TrainStep(sub), len(sub.rows[0])


def main() -> None:
    as_trained = sys.argv[1] == "trained"
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    torch.set_num_threads(1)
    steppers = {k: stepper(as_trained, v) for k, v in VARIANTS.items()}
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
        print(f"round {r}: " + ", ".join(f"{k} {v[-1]:.1f} pairs/s" for k, v in rates.items()),
              flush=True)
    ratio = statistics.median(n / c for n, c in zip(rates["narrow"], rates["control"]))
    print(f"{'compiled' if as_trained else 'eager'}, torch capability "
          f"{torch.backends.cpu.get_cpu_capability()}: median narrow / control {ratio:.2f}")


if __name__ == "__main__":
    main()
