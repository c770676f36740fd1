"""Pipeline-like point to point on 2-rank groups, for the slow-link test: each rank sends
``--mbytes`` of activations to the next rank and receives as much from the previous one
(ranks in a ring; each pair its own ``new_group``, as DeepSpeed's pipeline makes them),
then computes its gradients and all-reduces them over every rank by hand. It knows nothing
of scalescope.

    scalescope run -n 3 pairs_train.py --steps 12 --mbytes 2

``--exchange allreduce``: each rank all-reduces ``--mbytes`` on each of its two pair groups
instead, blocking, in the groups' order (as tensor-parallel pairs would): the what-if's
link benchmark. ``--step-log``: rank 0's step times (s), as JSON.
"""

import argparse
import json
import time

import torch
import torch.distributed as dist
from torch import nn


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--mbytes", type=float, default=2.0)
    p.add_argument("--exchange", choices=["p2p", "allreduce"], default="p2p")
    p.add_argument("--hidden", type=int, default=256, help="the model's width")
    p.add_argument("--step-log", default="")
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    pairs = [dist.new_group([r, (r + 1) % world]) for r in range(world)]  # every rank makes all
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    torch.manual_seed(rank)
    model = nn.Linear(args.hidden, args.hidden)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    sent = torch.zeros(int(args.mbytes * 2**20) // 4)
    received = torch.empty_like(sent)
    mine = sorted({rank, prv})  # the pair groups this rank is in, in the groups' order
    steps = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(torch.randn(64, args.hidden)).square().mean()
        if args.exchange == "p2p":
            works = [
                dist.isend(sent, nxt, group=pairs[rank]),
                dist.irecv(received, prv, group=pairs[prv]),
            ]
            for work in works:
                work.wait()
        else:
            for g in mine:
                dist.all_reduce(sent, group=pairs[g])
        loss.backward()
        for param in model.parameters():
            dist.all_reduce(param.grad)
        opt.step()
        steps.append(time.perf_counter() - t0)
    if rank == 0 and args.step_log:
        with open(args.step_log, "w") as f:
            json.dump(steps, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
