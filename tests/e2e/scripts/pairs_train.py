"""Pipeline-like point to point on 2-rank groups, for the slow-link test: each rank sends
``--mbytes`` of activations to the next rank and receives as much from the previous one
(ranks in a ring; each pair its own ``new_group``, as DeepSpeed's pipeline makes them),
then computes its gradients and all-reduces them over every rank by hand. It knows nothing
of scalescope.

    scalescope run -n 3 pairs_train.py --steps 12 --mbytes 2
"""

import argparse

import torch
import torch.distributed as dist
from torch import nn


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--mbytes", type=float, default=2.0)
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    pairs = [dist.new_group([r, (r + 1) % world]) for r in range(world)]  # every rank makes all
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    torch.manual_seed(rank)
    model = nn.Linear(256, 256)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    sent = torch.zeros(int(args.mbytes * 2**20) // 4)
    received = torch.empty_like(sent)
    for _ in range(args.steps):
        opt.zero_grad(set_to_none=True)
        loss = model(torch.randn(64, 256)).square().mean()
        works = [
            dist.isend(sent, nxt, group=pairs[rank]),
            dist.irecv(received, prv, group=pairs[prv]),
        ]
        for work in works:
            work.wait()
        loss.backward()
        for param in model.parameters():
            dist.all_reduce(param.grad)
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
