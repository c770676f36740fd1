"""A compute-bound DDP script (an MLP on DataLoader batches), the planted workload of
``tune_gain.py --workload oversubscribed``: run with OMP_NUM_THREADS far above the cores
each rank has. It knows nothing of scalescope; its own clock writes global samples/s to
--out (rank 0)."""

import argparse
import os
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

sys.path.insert(0, os.path.dirname(__file__))
from clock import Clock  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--out", default="")
    args = p.parse_args()
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 10))  # fmt: skip
    ddp = DDP(model)
    n = args.steps * args.batch_size * dist.get_world_size()
    data = TensorDataset(torch.randn(n, 256), torch.randint(0, 10, (n,)))
    loader = DataLoader(data, batch_size=args.batch_size, sampler=DistributedSampler(data))
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-2)
    clock = Clock(args.warmup_steps, args.batch_size)
    for step, (x, y) in enumerate(loader):
        opt.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()
        clock.step_done(step)
    clock.write(args.out)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
