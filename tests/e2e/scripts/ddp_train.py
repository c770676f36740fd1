"""A small real DDP training script used by the end-to-end tests.

It knows nothing of scalescope. It writes the facts the tests check the probe against
(parameter and buffer bytes, DDP's own bucket count) to --facts, from rank 0.
"""

import argparse
import contextlib
import gc
import json
import os
import signal
import subprocess
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset, default_collate


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--width", type=int, default=256, help="the hidden layers' width")
    p.add_argument(
        "--no-sync",
        action="store_true",
        help="no gradient all-reduce and no buffer broadcast: each rank trains alone (the "
        "job's communication removed, to measure what it costs)",
    )
    p.add_argument(
        "--preload",
        action="store_true",
        help="every batch loaded before the first step: the steps take no time in the "
        "DataLoader (the job's input loading removed, to measure what it costs)",
    )
    p.add_argument("--bucket-cap-mb", type=float, default=0.05)
    p.add_argument("--user-allreduce", type=int, default=0, help="elements, 0 = none")
    p.add_argument("--fail-rank", type=int, default=-1)
    p.add_argument("--fail-step", type=int, default=3)
    p.add_argument("--hook", choices=["none", "fp16"], default="none")
    p.add_argument("--sleep-rank", type=int, default=-1)
    p.add_argument("--sleep-s", type=float, default=0.0)
    p.add_argument(
        "--sleep-where",
        choices=WHERE,
        default="forward",
        help="where the sleeping rank sleeps: in the DataLoader (collate), in forward, in "
        "backward (a hook on the output), in the optimizer step (a pre-hook), or outside "
        "every phase (after the optimizer step, at the end of the loop's body)",
    )
    p.add_argument(
        "--sleep-from",
        type=int,
        default=0,
        help="sleep in steps from this one on (the steps before it are the undelayed "
        "reference; a step ends with the optimizer step, as scalescope's probe counts them)",
    )
    p.add_argument(
        "--sleep-every",
        type=int,
        default=0,
        metavar="K",
        help="sleep only in every K-th step (steps K-1, 2K-1, ...): a periodic stall; 0: each",
    )
    p.add_argument(
        "--also-sleep",
        default="",
        metavar="RANK:SECONDS",
        help="a second rank that sleeps, as long as given, where and from when --sleep-where "
        "and --sleep-from say (two causes at once)",
    )
    p.add_argument("--workers", type=int, default=0, help="DataLoader worker processes")
    p.add_argument(
        "--gc-rank",
        type=int,
        default=-1,
        help="this rank builds --gc-objects reference cycles a step and collects them every "
        "--gc-every steps (a garbage collector's periodic pause)",
    )
    p.add_argument("--gc-every", type=int, default=5)
    p.add_argument("--gc-objects", type=int, default=50_000)
    p.add_argument(
        "--pin-cores",
        action="store_true",
        help="each rank pinned to core RANK (mod the cores it may use)",
    )
    p.add_argument(
        "--hog-rank",
        type=int,
        default=-1,
        help="this rank starts --hogs busy-loop processes on its own core (with --pin-cores: "
        "the rank's core shared), killed at the end",
    )
    p.add_argument("--hogs", type=int, default=1)
    p.add_argument("--step-log", default="", help="JSON list of rank 0's step times (s)")
    p.add_argument("--ready-file", default="")
    p.add_argument("--facts", default="")
    p.add_argument("--sleep-log", default="", help="JSON list of the sleeps' real durations")
    p.add_argument(
        "--spin",
        action="store_true",
        help="the slow rank computes as long as it would sleep (a busy loop on its thread)",
    )
    p.add_argument(
        "--world-line",
        action="store_true",
        help="each rank prints 'rank R of N: sum S' at its end (S: all-reduced sum of rank + 1)",
    )
    return p.parse_args()


WHERE = ("data", "forward", "backward", "optimizer", "outside", "getitem")
"""``getitem``: in the dataset's ``__getitem__`` (in the loader's workers, with ``--workers``),
the batch's sleep spread over its samples; from the first step (``--sleep-from`` and
``--sleep-every`` do not reach the workers)."""


class Delay:
    """A rank made slow by a known amount, once per step. The time each sleep really took
    is kept (``slept``, s): a busy machine wakes the rank late."""

    def __init__(self, seconds: float, spin: bool = False) -> None:
        self.seconds = seconds
        self.spin = spin
        self.active = True
        """False in the steps before ``--sleep-from``."""
        self.slept: list[float] = []

    def __call__(self, *_: object) -> None:
        if self.seconds and self.active:
            start = time.perf_counter()
            if self.spin:
                while time.perf_counter() - start < self.seconds:
                    pass
            else:
                time.sleep(self.seconds)
            self.slept.append(time.perf_counter() - start)


class Sleep(nn.Module):
    """Sleeps in every forward (``delay``)."""

    def __init__(self, delay: Delay) -> None:
        super().__init__()
        self.delay = delay

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.delay()
        return x


def model(delay: Delay | None = None, width: int = 256) -> nn.Module:
    return nn.Sequential(
        Sleep(delay or Delay(0.0)),
        nn.Linear(64, width),
        nn.BatchNorm1d(width),
        nn.ReLU(),
        nn.Linear(width, width),
        nn.ReLU(),
        nn.Linear(width, 10),
    )


def sleep_then(delay: Delay):
    """A gradient hook that sleeps first: backward is slower by ``delay``."""

    def hook(grad: torch.Tensor) -> torch.Tensor:
        delay()
        return grad

    return hook


class SlowSamples(TensorDataset):
    """Each sample sleeps ``seconds`` first: a slow decode or augmentation."""

    def __init__(self, seconds: float, *tensors: torch.Tensor) -> None:
        super().__init__(*tensors)
        self.seconds = seconds

    def __getitem__(self, index: int) -> tuple:
        time.sleep(self.seconds)
        return super().__getitem__(index)


def loader(
    args: argparse.Namespace, world: int, delay: Delay | None, per_sample: float = 0.0
) -> DataLoader:
    n = args.steps * args.batch_size * world
    data = SlowSamples(per_sample, torch.randn(n, 64), torch.randint(0, 10, (n,)))

    def collate(batch: list) -> object:
        if delay is not None:
            delay()
        return default_collate(batch)

    return DataLoader(
        data,
        batch_size=args.batch_size,
        sampler=DistributedSampler(data),
        collate_fn=collate,
        num_workers=args.workers,
    )


def due(args: argparse.Namespace, step: int) -> bool:
    """Whether the sleeping rank sleeps in this step (``--sleep-from``, ``--sleep-every``)."""
    every = args.sleep_every
    return step >= args.sleep_from and (every <= 0 or step % every == every - 1)


def train(args: argparse.Namespace, ddp: DDP, delay: Delay, rank: int, world: int) -> list:
    """The training loop; rank 0's step times (s), each from the end of one optimizer step
    to the end of the next (the sleep after the optimizer step belongs to the next step)."""
    where = {w: delay if w == args.sleep_where else None for w in WHERE}
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    if where["optimizer"]:
        opt.register_step_pre_hook(delay)
    steps, last = [], time.perf_counter()
    delay.active = due(args, 0)
    per_sample = delay.seconds / args.batch_size if where["getitem"] else 0.0
    garbage = Garbage(args.gc_objects if rank == args.gc_rank else 0, args.gc_every)
    batches = loader(args, world, where["data"], per_sample)
    for step, (x, y) in enumerate(list(batches) if args.preload else batches):
        if rank == args.fail_rank and step == args.fail_step:
            raise RuntimeError(f"deliberate failure on rank {rank} at step {step}")
        if args.ready_file and step == 2 and rank == 0:
            open(args.ready_file, "w").close()
        delay.active = due(args, step)
        opt.zero_grad(set_to_none=True)
        with ddp.no_sync() if args.no_sync else contextlib.nullcontext():
            out = ddp(x)
            if where["backward"]:
                out.register_hook(sleep_then(delay))
            nn.functional.cross_entropy(out, y).backward()
        opt.step()
        now = time.perf_counter()
        steps.append(now - last)
        last = now
        delay.active = due(args, step + 1)  # the next step's (and its batch's)
        if where["outside"]:
            delay()
        if args.user_allreduce:
            dist.all_reduce(torch.ones(args.user_allreduce, dtype=torch.float64))
        garbage.step(step)
    return steps


class Garbage:
    """Reference cycles built every step and collected every ``every`` steps: the pause of a
    garbage collector that a loop keeping dicts of tensors' metadata causes (automatic
    collection off, as a loop that calls ``gc.collect`` itself turns it)."""

    def __init__(self, objects: int, every: int) -> None:
        self.objects, self.every = objects, every
        if objects:
            gc.disable()

    def step(self, step: int) -> None:
        if not self.objects:
            return
        for _ in range(self.objects):
            node: dict = {}
            node["self"] = node
        if step % self.every == self.every - 1:
            gc.collect()


def pin(rank: int) -> int:
    """Pins this rank, every thread of it (gloo's, torch's), to one core of those it may use:
    RANK mod their count. Threads started later inherit it."""
    cores = sorted(os.sched_getaffinity(0))
    core = cores[rank % len(cores)]
    for task in os.listdir("/proc/self/task"):
        os.sched_setaffinity(int(task), {core})
    return core


def hog(core: int | None) -> subprocess.Popen:
    """A busy-loop process on ``core`` (any core when None): the rank's core shared."""
    spin = "import os, sys\nif len(sys.argv) > 1: os.sched_setaffinity(0, {int(sys.argv[1])})\n"
    spin += "while True: pass\n"
    extra = [] if core is None else [str(core)]
    return subprocess.Popen([sys.executable, "-c", spin, *extra])


def main() -> None:
    args = parse()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    core = pin(rank) if args.pin_cores else None
    hogging = [hog(core) for _ in range(args.hogs)] if rank == args.hog_rank else []
    also_rank, _, also_s = args.also_sleep.partition(":")
    seconds = float(also_s) if also_rank and rank == int(also_rank) else 0.0
    delay = Delay(args.sleep_s if rank == args.sleep_rank else seconds, args.spin)
    net = model(delay if args.sleep_where == "forward" else None, args.width)
    ddp = DDP(net, bucket_cap_mb=args.bucket_cap_mb, broadcast_buffers=not args.no_sync)
    if args.hook == "fp16":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    try:
        steps = train(args, ddp, delay, rank, world)
    finally:
        for process in hogging:
            process.kill()
            process.wait()
    if rank == 0 and args.facts:
        write_facts(args.facts, net, ddp, world)
    if rank == args.sleep_rank and args.sleep_log:
        with open(args.sleep_log, "w") as f:
            json.dump(delay.slept, f)
    if rank == 0 and args.step_log:
        with open(args.step_log, "w") as f:
            json.dump(steps, f)
    if args.world_line:
        total = torch.tensor([rank + 1.0])
        dist.all_reduce(total)
        print(f"rank {rank} of {world}: sum {total.item():.0f}")
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
