"""A small real DDP training script used by the end-to-end tests.

It knows nothing of scalescope. It writes the facts the tests check the probe against
(parameter and buffer bytes, DDP's own bucket count) to --facts, from rank 0.
"""

import argparse
import json
import os
import signal
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--bucket-cap-mb", type=float, default=0.05)
    p.add_argument("--user-allreduce", type=int, default=0, help="elements, 0 = none")
    p.add_argument("--fail-rank", type=int, default=-1)
    p.add_argument("--fail-step", type=int, default=3)
    p.add_argument("--hook", choices=["none", "fp16"], default="none")
    p.add_argument("--sleep-rank", type=int, default=-1)
    p.add_argument("--sleep-s", type=float, default=0.0)
    p.add_argument("--ready-file", default="")
    p.add_argument("--facts", default="")
    p.add_argument("--sleep-log", default="", help="JSON list of the sleeps' real durations")
    return p.parse_args()


class Sleep(nn.Module):
    """Sleeps in every forward: a rank made slow by a known amount. The time each sleep
    really took is kept (``slept``, s): a busy machine wakes the rank late."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds
        self.slept: list[float] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.seconds:
            start = time.perf_counter()
            time.sleep(self.seconds)
            self.slept.append(time.perf_counter() - start)
        return x


def model(sleep_s: float = 0.0) -> nn.Module:
    return nn.Sequential(
        Sleep(sleep_s),
        nn.Linear(64, 256),
        nn.BatchNorm1d(256),
        nn.ReLU(),
        nn.Linear(256, 256),
        nn.ReLU(),
        nn.Linear(256, 10),
    )


def main() -> None:
    args = parse()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    net = model(args.sleep_s if rank == args.sleep_rank else 0.0)
    ddp = DDP(net, bucket_cap_mb=args.bucket_cap_mb)
    if args.hook == "fp16":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    n = args.steps * args.batch_size * world
    data = TensorDataset(torch.randn(n, 64), torch.randint(0, 10, (n,)))
    loader = DataLoader(data, batch_size=args.batch_size, sampler=DistributedSampler(data))
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    for step, (x, y) in enumerate(loader):
        if rank == args.fail_rank and step == args.fail_step:
            raise RuntimeError(f"deliberate failure on rank {rank} at step {step}")
        if args.ready_file and step == 2 and rank == 0:
            open(args.ready_file, "w").close()
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        if args.user_allreduce:
            dist.all_reduce(torch.ones(args.user_allreduce, dtype=torch.float64))
    if rank == 0 and args.facts:
        write_facts(args.facts, net, ddp, world)
    if rank == args.sleep_rank and args.sleep_log:
        with open(args.sleep_log, "w") as f:
            json.dump(net[0].slept, f)
    dist.destroy_process_group()


def write_facts(path: str, net: nn.Module, ddp: DDP, world: int) -> None:
    logging = ddp._get_ddp_logging_data()
    facts = {
        "world_size": world,
        "param_bytes": sum(p.numel() * p.element_size() for p in net.parameters()),
        "trainable_bytes": sum(
            p.numel() * p.element_size() for p in net.parameters() if p.requires_grad
        ),
        "buffer_bytes": sum(b.numel() * b.element_size() for b in net.buffers()),
        "bucket_sizes": logging.get("rebuilt_bucket_sizes") or logging.get("bucket_sizes"),
        "logging": {k: v for k, v in logging.items() if isinstance(v, (int, str, float))},
        "pid": os.getpid(),
    }
    with open(path, "w") as f:
        json.dump(facts, f)


if __name__ == "__main__":
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    main()
