"""A tiny DDP training script for the tune tests: knobs that cost a known time per step.

Every step sleeps ``BASE_MS``, then ``--sleep-ms`` (an argument) and ``PAUSE_MS`` (an
environment variable) more, so the fastest configuration is known and its speed steady;
``--sleep-ms=crash`` raises at the start (a trial that crashes). It knows nothing of
scalescope.
"""

import argparse
import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

BASE_MS = 30.0


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--sleep-ms", default="0")
    args = p.parse_args()
    if args.sleep_ms == "crash":
        raise RuntimeError("deliberate crash of this configuration")
    pause_s = (BASE_MS + float(args.sleep_ms) + float(os.environ.get("PAUSE_MS", "0"))) / 1000
    dist.init_process_group("gloo")
    world = dist.get_world_size()
    torch.manual_seed(0)
    ddp = DDP(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)))
    n = args.steps * args.batch_size * world
    data = TensorDataset(torch.randn(n, 32), torch.randint(0, 4, (n,)))
    loader = DataLoader(data, batch_size=args.batch_size, sampler=DistributedSampler(data))
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    for x, y in loader:
        time.sleep(pause_s)
        opt.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
