"""A rank's device: the CPU without CUDA; on a GPU machine its local rank's GPU, and a clear
error for a local rank beyond the GPUs (NCCL refuses two ranks on one GPU). The machine
here has no GPU, so the GPU count is set by monkeypatching torch.cuda's two queries."""

from __future__ import annotations

import pytest
import torch

from scalescope.bench.rank_env import World, pick_device


def test_cpu_without_cuda():
    if torch.cuda.is_available():
        pytest.skip("CUDA present")
    assert pick_device(World(rank=3, local_rank=3, world_size=4)) == torch.device("cpu")


def test_a_local_rank_beyond_the_gpus_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(ValueError, match=r"local rank 1 has no GPU of its own \(1 visible\)"):
        pick_device(World(rank=1, local_rank=1, world_size=2))
