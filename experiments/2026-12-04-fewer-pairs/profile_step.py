"""Where one rank's quick-profile FlowCapsules training step spends its time.

usage: python profile_step.py trained|eager [STEPS]
Times STEPS steps (after 3 warm-up steps, where a compiled step compiles), then runs
torch.profiler over 5 more and prints the operators by their own CPU time, grouped by input
shapes. Set ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 for the AVX2 stand-in.
"""
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

from benchmark.bench import SUBJECTS
from trainloop import StepContext


def main() -> None:
    as_trained = sys.argv[1] == "trained"
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    torch.set_num_threads(1)
    torch.manual_seed(0)
    sub = SUBJECTS["flowcaps"]("quick", as_trained=as_trained)
    task, device = sub.task, torch.device("cpu")
    model = task.build(device)
    opt = task.optimizer(model)
    loss_fn = task.loss_module(model, 1)
    ctx = StepContext(step=0, epoch=0, fraction=0.5, rank=0, world=1, rows=len(sub.rows[0]),
                      device=device, state={})
    gen = torch.Generator().manual_seed(0)

    def step() -> None:
        total = task.step(loss_fn, sub.rows, gen, ctx)[0]
        opt.zero_grad(set_to_none=True)
        total.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), sub.grad_clip or float("inf"))
        opt.step()

    for _ in range(3):
        step()
    t = time.perf_counter()
    for _ in range(steps):
        step()
    dt = (time.perf_counter() - t) / steps
    batch = len(sub.rows[0])
    print(f"{'compiled' if as_trained else 'eager'}: {1000 * dt:.1f} ms a step of {batch} pairs, "
          f"{batch / dt:.1f} pairs/s, torch capability {torch.backends.cpu.get_cpu_capability()}")
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(5):
            step()
    print(prof.key_averages(group_by_input_shape=True).table(
        sort_by="self_cpu_time_total", row_limit=30, max_name_column_width=30,
        max_shapes_column_width=90))


if __name__ == "__main__":
    main()
