"""A DDP script that stops making progress on purpose, for the hang tests.

Each step ends with a user all_reduce of 4 floats (16 B). From step ``--at`` on, rank
``--rank`` does one of: ``host`` (sleeps in host work, outside every phase, before the step),
``mismatch`` (calls broadcast where the others call all_reduce), ``pause`` (saves a
checkpoint with ``torch.save`` to storage that takes ``--sleep-s`` after every ``--every``-th
optimizer step: the others wait in the next all_reduce, then all go on), ``none`` (nothing: a
run that completes).
"""

import argparse
import io
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


class SlowStorage(io.BytesIO):
    """A file whose first write takes ``seconds``: a checkpoint to a slow file system."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    def write(self, data: bytes) -> int:  # type: ignore[override]
        if self.seconds:
            time.sleep(self.seconds)
            self.seconds = 0.0
        return super().write(data)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--at", type=int, default=6)
    p.add_argument("--rank", type=int, default=1)
    p.add_argument("--mode", choices=["host", "mismatch", "pause", "none"], default="host")
    p.add_argument("--every", type=int, default=5)
    p.add_argument("--sleep-s", type=float, default=600.0)
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(args.steps):
        stuck = rank == args.rank and step >= args.at
        if stuck and args.mode == "host":
            time.sleep(args.sleep_s)
        x = torch.randn(16, 32)
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
        if args.mode == "pause" and rank == args.rank and step % args.every == args.every - 1:
            torch.save(model.state_dict(), SlowStorage(args.sleep_s))
        stats = torch.ones(4)
        if stuck and args.mode == "mismatch":
            dist.broadcast(stats, src=0)
        else:
            dist.all_reduce(stats)
        time.sleep(0.02)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
