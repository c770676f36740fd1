"""A small real DDP training loop under torch.profiler, one trace file per rank.

It knows nothing of scalescope: the tests run it under ``scalescope run`` (probe on) and
ingest the traces torch.profiler writes, to compare the two records of the same steps.
Per step: data, forward (with DDP's buffer broadcast), backward (gradient buckets),
a user all_reduce of the loss (before the optimizer, so both tools put it in the same
step), optimizer.step(), then prof.step().
"""

import argparse

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--trace-dir", required=True)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--wait", type=int, default=1)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--active", type=int, default=4)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--bucket-cap-mb", type=float, default=0.05)
    p.add_argument("--width", type=int, default=256)
    return p.parse_args()


def model(width: int) -> nn.Module:
    return nn.Sequential(
        nn.Linear(64, width),
        nn.BatchNorm1d(width),
        nn.ReLU(),
        nn.Linear(width, width),
        nn.ReLU(),
        nn.Linear(width, 10),
    )


def main() -> None:
    args = parse()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    ddp = DDP(model(args.width), bucket_cap_mb=args.bucket_cap_mb)
    n = args.steps * args.batch_size * world
    data = TensorDataset(torch.randn(n, 64), torch.randint(0, 10, (n,)))
    loader = DataLoader(data, batch_size=args.batch_size, sampler=DistributedSampler(data))
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    plan = schedule(wait=args.wait, warmup=args.warmup, active=args.active, repeat=args.repeat)
    handler = tensorboard_trace_handler(args.trace_dir, worker_name=f"rank{rank}")
    with profile(
        activities=[ProfilerActivity.CPU], schedule=plan, record_shapes=True, on_trace_ready=handler
    ) as prof:
        for x, y in loader:
            opt.zero_grad(set_to_none=True)
            loss = nn.functional.cross_entropy(ddp(x), y)
            loss.backward()
            dist.all_reduce(loss.detach().reshape(1))
            opt.step()
            prof.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
