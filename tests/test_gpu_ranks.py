"""One rank per visible GPU, each on its own device, with the global batch split among them;
tested as functions on a CPU machine (torch.cuda's counts patched), and through `flowcaps.train`
up to the point where it would start torchrun."""
from pathlib import Path

import pytest
import torch

import flowcaps
from flowcaps import launch
from flowcaps.profiles import for_data, smoke
from trainloop import ddp
from trainloop.rendezvous import Rendezvous


@pytest.fixture
def four_gpus(monkeypatch):
    """A node whose CUDA_VISIBLE_DEVICES lists four GPUs, outside torchrun."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)


def test_cuda_starts_one_rank_per_visible_gpu(four_gpus):
    """Before: one rank on CUDA unless several nodes, the other GPUs idle."""
    cfg = smoke().replace(batch_size=8)
    assert launch.ranks_for(cfg, "cuda") == 4
    assert launch.ranks_for(cfg, torch.device("cuda")) == 4
    assert launch.ranks_for(cfg, "cuda:2") == 1  # a device named by index: that GPU alone
    assert launch.ranks_for(cfg.replace(batch_size=2), "cuda") == 2  # a pair for each rank
    assert launch.ranks_for(cfg, "cuda", Rendezvous(2, endpoint="h:1")) == 4
    assert launch.ranks_for(cfg, "cpu") == 1  # cpu_ranks decides there, as before
    per_rank = launch.per_rank_config(cfg, 4)
    assert per_rank.loop.batch_size == 2 and per_rank.loop.device == cfg.loop.device


def test_each_rank_takes_the_gpu_of_its_local_rank(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_RANK", "2")
    assert ddp.rank_device(torch.device("cuda")) == torch.device("cuda", 2)
    assert ddp.rank_device(torch.device("cuda", 1)) == torch.device("cuda", 1)  # named: kept
    assert ddp.rank_device(torch.device("cpu")) == torch.device("cpu")
    monkeypatch.setenv("WORLD_SIZE", "1")  # one process: the current device, as before
    assert ddp.rank_device(torch.device("cuda")) == torch.device("cuda")


def test_train_on_a_node_of_four_gpus_starts_four_ranks(four_gpus, tiny_geo, tmp_path,
                                                         monkeypatch):
    """`flowcaps train --device cuda` (or auto) hands torchrun one rank per GPU; the run's budget
    in pairs and its global batch are the ones asked for."""
    started = []
    monkeypatch.setattr(launch, "launch", lambda cfg, data, ranks, progress, rdzv:
                        started.append((cfg, ranks)) or Path(cfg.loop.out) / "model.pt")
    for device in ("cuda", "auto"):
        cfg = for_data("smoke", "geo", out=str(tmp_path / device), image_size=32).replace(
            device=device, batch_size=8)
        flowcaps.train(cfg, tiny_geo, progress=False)
        assert started[-1] == (cfg, 4)
