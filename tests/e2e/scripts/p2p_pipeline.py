"""A hand-written pipeline (GPipe order) over a chain of ranks: rank r is stage r, receives
its activations from r - 1 and sends them on to r + 1, then sends the gradients of its
inputs back. The last stage (or ``--heavy-stage``) sleeps ``--sleep-ms`` in each forward (a
heavier stage), so the others wait for it. ``--step-log``: rank 0's step times (s), JSON.
It knows nothing of scalescope.

    scalescope run -n 3 p2p_pipeline.py --steps 6 --micro 3

Each link uses every way of moving a tensor: activations by ``isend``/``irecv`` on even
microbatches and ``batch_isend_irecv`` on odd ones (both waited for later), gradients by
blocking ``send``/``recv``. The link from stage 0 to 1 is on the default group, every later
link on its own 2-rank group (so a group rank is not the global rank). Each message is one
``--batch`` x ``--hidden`` float32 tensor.
"""

import argparse
import json
import time

import torch
import torch.distributed as dist
from torch import nn


class Stage(nn.Module):
    def __init__(self, hidden: int, sleep_s: float) -> None:
        super().__init__()
        self.layer = nn.Linear(hidden, hidden)
        self.sleep_s = sleep_s

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.sleep_s:
            time.sleep(self.sleep_s)
        return torch.relu(self.layer(x))


def send_async(t: torch.Tensor, dst: int, group, batched: bool):
    if batched:
        return dist.batch_isend_irecv([dist.P2POp(dist.isend, t, dst, group)])
    return [dist.isend(t, dst, group=group)]


def recv_async(t: torch.Tensor, src: int, group, batched: bool):
    if batched:
        return dist.batch_isend_irecv([dist.P2POp(dist.irecv, t, src, group)])
    return [dist.irecv(t, src, group=group)]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--micro", type=int, default=3)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--sleep-ms", type=float, default=15.0)
    p.add_argument("--heavy-stage", type=int, default=-1, help="the stage that sleeps; -1: last")
    p.add_argument("--step-log", default="", help="JSON list of rank 0's step times (s)")
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    links = [None] + [dist.new_group([r, r + 1]) for r in range(1, world - 1)]
    """links[r]: the group between stage r and r + 1 (every rank makes every group)."""
    last = rank == world - 1
    torch.manual_seed(rank)
    heavy = rank == (args.heavy_stage if args.heavy_stage >= 0 else world - 1)
    model = Stage(args.hidden, args.sleep_ms / 1e3 if heavy else 0.0)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    shape = (args.batch, args.hidden)
    steps, start = [], time.perf_counter()
    for _ in range(args.steps):
        opt.zero_grad(set_to_none=True)
        kept, pending = [], []
        for mb in range(args.micro):
            if rank == 0:
                x = torch.randn(shape)
            else:
                x = torch.empty(shape)
                for work in recv_async(x, rank - 1, links[rank - 1], mb % 2 == 1):
                    work.wait()
                x.requires_grad_()
            y = model(x)
            if not last:
                pending += send_async(y.detach(), rank + 1, links[rank], mb % 2 == 1)
            kept.append((x, y))
        for x, y in kept:
            if last:
                y.square().mean().backward()
            else:
                grad = torch.empty(shape)
                dist.recv(grad, rank + 1, group=links[rank])
                y.backward(grad)
            if rank > 0:
                dist.send(x.grad, rank - 1, group=links[rank - 1])
        for work in pending:
            work.wait()
        opt.step()
        steps.append(time.perf_counter() - start)
        start += steps[-1]
    if rank == 0 and args.step_log:
        with open(args.step_log, "w") as f:
            json.dump(steps, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
