"""Training step time of one quick-profile rank with and without the encoder's GroupNorm.

The rows of `scripts/bench_flowcaps.py` (its `time_config`: one thread, half the quick batch,
compiled, bf16 as "auto" resolves here, synthetic pairs) for `model.enc_norm` 0 and 8.

    python experiments/2026-11-28-geoplus-localisation/step_cost.py   # from the repository root
"""
import importlib.util
from pathlib import Path

from flowcaps import PROFILES

BENCH = Path(__file__).resolve().parents[2] / "scripts" / "bench_flowcaps.py"
spec = importlib.util.spec_from_file_location("bench_flowcaps", BENCH)
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

quick = PROFILES["quick"]()
base = quick.replace(threads=1, cpu_ranks=1, batch_size=quick.batch_size // 2)
for norm in (0, 8):
    row = bench.time_config(base.replace(model={"enc_norm": norm}), steps=15)
    print(f"enc_norm={norm}: {row['step_ms']} ms a step, {row['pairs_per_s']} pairs/s")
