"""Where the nodes of one training meet: torchrun's rendezvous flags, passed through, and the
one line that says why a node's torchrun failed when the nodes lost each other.

One node (the default) is torchrun's `--standalone`. Several nodes meet at a c10d rendezvous
on HOST:PORT (any node's address; torchrun on that node serves it), each starting the same
command; c10d numbers the nodes in the order they join, so global rank 0, which alone writes
the run's checkpoints and log, may be on any node: the run folder must be on a file system
every node sees (as on a cluster). `node_rank` goes to torchrun as given (its static
rendezvous uses it; c10d does not need it) and names the nodes in the messages below.
"""
from __future__ import annotations

from dataclasses import dataclass

from trainloop.errors import LoopError

# torchrun's own join timeout: nodes that a queue starts minutes apart still meet.
JOIN_TIMEOUT_S = 600
MAX_JOIN_TIMEOUT_S = 86400  # a day: past it a missing node is a mistake, not a slow queue
MAX_RESTARTS = 100
# What torchrun's agent raises when the nodes did not all join within the timeout.
JOIN_TIMED_OUT = "RendezvousTimeoutError"
# What a rank (gloo, nccl) or torchrun's agent (the c10d store) says when a peer's process or
# the node serving the rendezvous is gone; a failure of this node's own ranks says none of it.
PEER_LOST = ("Connection reset by peer", "Connection closed by peer", "Connection was likely closed",
             "RendezvousConnectionError", "Broken pipe", "remote process exited")


@dataclass(frozen=True)
class Rendezvous:
    nnodes: int = 1
    node_rank: int | None = None
    endpoint: str | None = None  # HOST:PORT of the c10d rendezvous
    run_id: str = "none"  # torchrun's --rdzv-id: tells apart two trainings at one endpoint
    join_timeout: int | None = None  # seconds a node waits for the others; None: JOIN_TIMEOUT_S
    max_restarts: int = 0  # torchrun's: times it starts a failed worker group again

    def validate(self) -> None:
        if self.nnodes < 1:
            raise LoopError(f"--nnodes must be >= 1, got {self.nnodes}")
        if self.nnodes == 1 and (self.endpoint or self.node_rank or self.join_timeout is not None):
            raise LoopError("--rdzv-endpoint, --node-rank and --rdzv-timeout are for --nnodes 2 "
                            "or more")
        if self.nnodes > 1:
            host, _, port = (self.endpoint or "").rpartition(":")
            if not host or not port.isdigit():
                raise LoopError(f"--nnodes {self.nnodes} needs --rdzv-endpoint HOST:PORT (where "
                                f"the nodes meet), got {self.endpoint!r}")
        if self.node_rank is not None and not 0 <= self.node_rank < self.nnodes:
            raise LoopError(f"--node-rank must be in 0..{self.nnodes - 1}, got {self.node_rank}")
        if self.join_timeout is not None and not 1 <= self.join_timeout <= MAX_JOIN_TIMEOUT_S:
            raise LoopError(f"--rdzv-timeout must be in 1..{MAX_JOIN_TIMEOUT_S} seconds, got "
                            f"{self.join_timeout}")
        if not 0 <= self.max_restarts <= MAX_RESTARTS:
            raise LoopError(f"--max-restarts must be in 0..{MAX_RESTARTS}, got {self.max_restarts}")

    @property
    def multi_node(self) -> bool:
        return self.nnodes > 1

    @property
    def wait_s(self) -> int:
        return JOIN_TIMEOUT_S if self.join_timeout is None else self.join_timeout

    def torchrun_args(self, nproc_per_node: int) -> list[str]:
        """torchrun's flags before the command it starts."""
        restarts = [f"--max-restarts={self.max_restarts}"]
        if not self.multi_node:
            return ["--standalone", f"--nproc-per-node={nproc_per_node}", *restarts]
        return ([f"--nnodes={self.nnodes}", f"--nproc-per-node={nproc_per_node}",
                 "--rdzv-backend=c10d", f"--rdzv-endpoint={self.endpoint}",
                 f"--rdzv-id={self.run_id}", f"--rdzv-conf=join_timeout={self.wait_s}", *restarts]
                + ([f"--node-rank={self.node_rank}"] if self.node_rank is not None else []))

    def lost_nodes(self, output: str, saved_step: int | None) -> str | None:
        """The one line for a multi-node run whose torchrun `output` shows that the nodes did
        not all join, or that another node went away mid-training; None for any other failure
        (or on one node). `saved_step`: the step of the checkpoint in the run folder."""
        if not self.multi_node:
            return None
        me = (f"node {self.node_rank} of {self.nnodes}" if self.node_rank is not None
              else f"this node (one of {self.nnodes})")
        if JOIN_TIMED_OUT in output:
            return (f"{me}: the other node(s) did not join {self.endpoint} within {self.wait_s} s "
                    f"(start them with the same --rdzv-endpoint and --nnodes; --rdzv-timeout "
                    f"sets the wait)")
        if not any(said in output for said in PEER_LOST):
            return None
        # Two nodes: the other one is known; past two, any of them may have gone.
        other = (f"node {1 - self.node_rank}" if self.nnodes == 2 and self.node_rank is not None
                 else "another node")
        kept = (f"the checkpoint at step {saved_step} is kept: start every node again with the "
                f"same command to resume" if saved_step is not None else
                "no checkpoint was saved yet: start every node again with the same command to "
                "train from the start")
        return f"{other} stopped (its ranks lost the connection to the others); {kept}"
