"""What every workload script needs before its work starts: its place in the job, its
device, and argparse types. Kept free of torchvision, whose import costs as much as torch's:
the workloads that do not need it start faster."""

from __future__ import annotations

import argparse
import math
import os
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class World:
    """This process's place in the job, from the launcher's environment variables."""

    rank: int
    local_rank: int
    world_size: int

    @classmethod
    def from_env(cls) -> World:
        missing = [
            v for v in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if v not in os.environ
        ]
        if missing:
            raise ValueError(
                f"{', '.join(missing)} not set: run under torchrun or `scalescope bench`"
            )
        rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        return cls(rank, int(os.environ.get("LOCAL_RANK", rank)), world_size)


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {text}")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def pick_device(world: World) -> torch.device:
    """This rank's GPU (its local rank), or the CPU when torch sees no CUDA device.

    A local rank without a GPU of its own is an error: NCCL refuses two ranks on one GPU.
    """
    if not torch.cuda.is_available():
        return torch.device("cpu")
    gpus = torch.cuda.device_count()
    if world.local_rank >= gpus:
        raise ValueError(
            f"local rank {world.local_rank} has no GPU of its own ({gpus} visible): run at "
            f"most {gpus} ranks per node, or hide the GPUs (CUDA_VISIBLE_DEVICES=) for gloo "
            "on the CPU"
        )
    torch.cuda.set_device(world.local_rank)
    return torch.device("cuda", world.local_rank)
