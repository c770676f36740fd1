"""A communication-bound DDP script: a wide MLP (about 25 M parameters, 100 MB of gradients
per step) on plain tensors, no DataLoader, 8 samples per rank per step. It knows nothing of
scalescope; its own clock writes global samples/s to --out (rank 0)."""

import argparse
import os
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(__file__))
from clock import Clock  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--width", type=int, default=3072)
    p.add_argument("--out", default="")
    args = p.parse_args()
    dist.init_process_group("gloo")
    torch.manual_seed(dist.get_rank())
    w = args.width
    model = nn.Sequential(nn.Linear(1024, w), nn.ReLU(), nn.Linear(w, w), nn.ReLU(),
                          nn.Linear(w, w), nn.ReLU(), nn.Linear(w, 16))  # fmt: skip
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    clock = Clock(args.warmup_steps, args.batch_size)
    for step in range(args.steps):
        x = torch.randn(args.batch_size, 1024)
        y = torch.randint(0, 16, (args.batch_size,))
        opt.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()
        clock.step_done(step)
    clock.write(args.out)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
