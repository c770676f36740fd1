"""A DDP training script that never ends by itself, for tune's time limits: every step sleeps
``BASE_MS`` plus ``--sleep-ms``; ``--sleep-ms=hang`` joins the group and then never steps.
tune must stop each trial at its --trial-seconds. It knows nothing of scalescope."""

import argparse
import itertools
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

BASE_MS = 30.0


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sleep-ms", default="0")
    args = p.parse_args()
    dist.init_process_group("gloo")
    if args.sleep_ms == "hang":
        while True:
            time.sleep(1)
    pause_s = (BASE_MS + float(args.sleep_ms)) / 1000
    torch.manual_seed(0)
    ddp = DDP(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)))
    n = 64 * 16 * dist.get_world_size()
    data = TensorDataset(torch.randn(n, 32), torch.randint(0, 4, (n,)))
    sampler = DistributedSampler(data)
    loader = DataLoader(data, batch_size=16, sampler=sampler)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    for epoch in itertools.count():
        sampler.set_epoch(epoch)
        for x, y in loader:
            time.sleep(pause_s)
            opt.zero_grad(set_to_none=True)
            nn.functional.cross_entropy(ddp(x), y).backward()
            opt.step()


if __name__ == "__main__":
    main()
