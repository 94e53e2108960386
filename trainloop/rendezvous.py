"""Where the nodes of one training meet: torchrun's rendezvous flags, passed through.

One node (the default) is torchrun's `--standalone`. Several nodes meet at a c10d rendezvous
on HOST:PORT (any node's address; torchrun on that node serves it), each starting the same
command; c10d numbers the nodes in the order they join, so global rank 0, which alone writes
the run's checkpoints and log, may be on any node: the run folder must be on a file system
every node sees (as on a cluster). `node_rank` goes to torchrun as given (its static
rendezvous uses it; c10d does not need it).
"""
from __future__ import annotations

from dataclasses import dataclass

from trainloop.errors import LoopError


@dataclass(frozen=True)
class Rendezvous:
    nnodes: int = 1
    node_rank: int | None = None
    endpoint: str | None = None  # HOST:PORT of the c10d rendezvous
    run_id: str = "none"  # torchrun's --rdzv-id: tells apart two trainings at one endpoint

    def validate(self) -> None:
        if self.nnodes < 1:
            raise LoopError(f"--nnodes must be >= 1, got {self.nnodes}")
        if self.nnodes == 1 and (self.endpoint or self.node_rank):
            raise LoopError("--rdzv-endpoint and --node-rank are for --nnodes 2 or more")
        if self.nnodes > 1:
            host, _, port = (self.endpoint or "").rpartition(":")
            if not host or not port.isdigit():
                raise LoopError(f"--nnodes {self.nnodes} needs --rdzv-endpoint HOST:PORT (where "
                                f"the nodes meet), got {self.endpoint!r}")
        if self.node_rank is not None and not 0 <= self.node_rank < self.nnodes:
            raise LoopError(f"--node-rank must be in 0..{self.nnodes - 1}, got {self.node_rank}")

    @property
    def multi_node(self) -> bool:
        return self.nnodes > 1

    def torchrun_args(self, nproc_per_node: int) -> list[str]:
        """torchrun's flags before the command it starts."""
        if not self.multi_node:
            return ["--standalone", f"--nproc-per-node={nproc_per_node}"]
        return ([f"--nnodes={self.nnodes}", f"--nproc-per-node={nproc_per_node}",
                 "--rdzv-backend=c10d", f"--rdzv-endpoint={self.endpoint}",
                 f"--rdzv-id={self.run_id}"]
                + ([f"--node-rank={self.node_rank}"] if self.node_rank is not None else []))
