"""An input-bound DDP script: a DataLoader with ``num_workers=0`` whose per-sample transform
is heavy (a read that waits on storage, then a blur and a normalisation of a 3x64x64 image)
in front of a small CNN. It opts in to tune's loader knobs through
``scalescope.tune.knobs()``; its own clock writes global samples/s to --out (rank 0)."""

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler

import scalescope.tune

sys.path.insert(0, os.path.dirname(__file__))
from clock import Clock  # noqa: E402

KERNEL = torch.full((3, 1, 5, 5), 1 / 25)


class Images(Dataset):
    """Generated images; each costs ``read_ms`` of waiting (a network file system) and a
    5x5 blur of the image, three times."""

    def __init__(self, n: int, read_ms: float) -> None:
        self.n, self.read_s = n, read_ms / 1000

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        time.sleep(self.read_s)
        g = torch.Generator().manual_seed(i)
        img = torch.rand(1, 3, 64, 64, generator=g)
        for _ in range(3):
            img = nn.functional.conv2d(img, KERNEL, padding=2, groups=3)
        img = (img - img.mean()) / (img.std() + 1e-6)
        return img[0], i % 10


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--read-ms", type=float, default=4.0)
    p.add_argument("--out", default="")
    args = p.parse_args()
    k = scalescope.tune.knobs({"workers": 0, "pin_memory": False})
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(4),
                          nn.Flatten(), nn.Linear(16 * 16 * 16, 10))  # fmt: skip
    ddp = DDP(model)
    data = Images(args.steps * args.batch_size * dist.get_world_size(), args.read_ms)
    loader = DataLoader(data, batch_size=args.batch_size, sampler=DistributedSampler(data),
                        num_workers=k["workers"], pin_memory=k["pin_memory"])  # fmt: skip
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
