"""One rank of a 2-rank DDP run on gloo, 20 steps, then leaves the group; with `--run-program` it
ends through trainloop.ddp.run_program (the rule), else as a plain script does."""
import sys

import torch
from torch import nn

from trainloop import ddp


def main() -> None:
    try:
        ddp.setup(torch.device("cpu"))
        torch.set_num_threads(1)
        model = nn.parallel.DistributedDataParallel(
            nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1)))
        opt = torch.optim.Adam(model.parameters())
        gen = torch.Generator().manual_seed(0)
        for _ in range(20):
            loss = model(torch.randn(8, 64, generator=gen)).pow(2).mean()  # (,)
            opt.zero_grad()
            loss.backward()
            opt.step()
            ddp.agree([float(loss.detach())], 2, torch.device("cpu"))
        ddp.barrier(2)
    finally:
        ddp.leave()


if "--run-program" in sys.argv:
    ddp.run_program(main)
else:
    main()
