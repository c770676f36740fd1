"""A DDP script that holds each rank in a start stage until the test lets it go on.

Before ``init_process_group`` rank r waits for the file ``--go-init`` + ``.r`` (a rank let go
first then waits inside ``init_process_group`` for the others); after it, before building the
model, for ``--go-model``; then it trains a few steps. It knows nothing of scalescope.
"""

import argparse
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def hold(path: str, limit_s: float = 120.0) -> None:
    end = time.monotonic() + limit_s
    while path and not Path(path).exists() and time.monotonic() < end:
        time.sleep(0.1)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--go-init", default="")
    p.add_argument("--go-model", default="")
    p.add_argument("--steps", type=int, default=3)
    args = p.parse_args()
    hold(f"{args.go_init}.{os.environ['RANK']}" if args.go_init else "")
    dist.init_process_group("gloo")
    hold(args.go_model)
    model = DDP(nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(args.steps):
        opt.zero_grad()
        model(torch.randn(4, 8)).sum().backward()
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
