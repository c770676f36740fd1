"""A two-stage pipeline written with ``torch.distributed.pipelining``: an MLP of ``--blocks``
blocks split between the ranks (``--split 4`` puts blocks 0-3 on stage 0, the rest on
stage 1), trained with GPipe or 1F1B over ``--micro`` microbatches; ``--schedule interleaved``: each
rank holds two stages (rank and rank + world), the blocks split evenly between the
2 x world stages, trained with Interleaved1F1B; ``--schedule zero-bubble`` likewise with
InterleavedZeroBubble (its backward split into the inputs' and the weights' gradients).
``--heavy-stage S --sleep-ms X``: stage S (under an interleaved schedule, every stage rank S
holds) sleeps X ms in each microbatch's forward, outside its blocks (a forward pre-hook on the
stage's module: extra work no block move carries). ``--step-log``: rank 0's step times (s),
JSON. It knows nothing of scalescope. It prints its own clock's figures as one line:

    PP_CLOCK samples_per_s=... step_ms=... compute_ms=...

(the measured steps after ``--warmup``; ``compute_ms``: this stage's forward and backward
per step, by perf_counter around each microbatch's chunk, summed).

    scalescope run -n 2 pp_train.py --schedule 1f1b --split 2
"""

import argparse
import json
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.pipelining import (
    PipelineStage,
    Schedule1F1B,
    ScheduleGPipe,
    ScheduleInterleaved1F1B,
    ScheduleInterleavedZeroBubble,
)

SCHEDULES = {
    "gpipe": ScheduleGPipe,
    "1f1b": Schedule1F1B,
    "interleaved": ScheduleInterleaved1F1B,
    "zero-bubble": ScheduleInterleavedZeroBubble,
}
INTERLEAVED = ("interleaved", "zero-bubble")
CHUNKS = 2
"""Stages per rank under the interleaved schedule."""


def block(hidden: int) -> nn.Module:
    return nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU())


def stage_module(rank: int, blocks: int, split: int, hidden: int) -> nn.Sequential:
    mine = range(split) if rank == 0 else range(split, blocks)
    return nn.Sequential(*(block(hidden) for _ in mine))


def timed(stage: PipelineStage, spent: list[float]) -> None:
    """The stage's own clock: perf_counter around each forward and backward chunk."""
    for name in ("forward_one_chunk", "backward_one_chunk", "backward_weight_one_chunk"):
        original = getattr(stage, name)

        def chunk(*args, _original=original, **kwargs):
            start = time.perf_counter()
            try:
                return _original(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - start

        setattr(stage, name, chunk)


def heavy(module: nn.Module, sleep_ms: float) -> None:
    """``module`` sleeps ``sleep_ms`` before each forward."""

    def sleep(_module: nn.Module, _args: tuple) -> None:
        time.sleep(sleep_ms / 1e3)

    module.register_forward_pre_hook(sleep)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--schedule", choices=sorted(SCHEDULES), default="gpipe")
    p.add_argument("--blocks", type=int, default=8)
    p.add_argument("--split", type=int, default=4)
    p.add_argument("--micro", type=int, default=4)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--sleep-ms", type=float, default=0.0)
    p.add_argument("--heavy-stage", type=int, default=-1, help="the rank whose stages sleep")
    p.add_argument("--step-log", default="", help="JSON list of rank 0's step times (s)")
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    spent = [0.0]
    if args.schedule in INTERLEAVED:
        per_stage = args.blocks // (CHUNKS * world)
        modules = [
            nn.Sequential(*(block(args.hidden) for _ in range(per_stage))) for _ in range(CHUNKS)
        ]
        stages = [
            PipelineStage(m, rank + i * world, CHUNKS * world, torch.device("cpu"))
            for i, m in enumerate(modules)
        ]
        module = nn.ModuleList(modules)
    else:
        module = stage_module(rank, args.blocks, args.split, args.hidden)
        stages = [PipelineStage(module, rank, world, torch.device("cpu"))]
    for stage in stages:
        timed(stage, spent)
    if rank == args.heavy_stage and args.sleep_ms:
        for m in module if args.schedule in INTERLEAVED else [module]:
            heavy(m, args.sleep_ms)
    held = stages if args.schedule in INTERLEAVED else stages[0]
    schedule = SCHEDULES[args.schedule](held, args.micro, loss_fn=nn.functional.mse_loss)
    opt = torch.optim.SGD(module.parameters(), lr=1e-3)
    x = torch.randn(args.batch, args.hidden)
    target = torch.randn(args.batch, args.hidden)
    times, computes = [], []
    for _ in range(args.steps):
        start, spent[0] = time.perf_counter(), 0.0
        opt.zero_grad(set_to_none=True)
        if rank == 0:
            schedule.step(x)
        elif rank == world - 1:
            schedule.step(target=target)
        else:
            schedule.step()
        opt.step()
        times.append(time.perf_counter() - start)
        computes.append(spent[0])
    measured, compute = times[args.warmup :], computes[args.warmup :]
    step_s = sum(measured) / len(measured)
    print(
        f"PP_CLOCK rank={rank} samples_per_s={args.batch / step_s:.1f} "
        f"step_ms={step_s * 1e3:.3f} compute_ms={sum(compute) / len(compute) * 1e3:.3f}",
        flush=True,
    )
    if rank == 0 and args.step_log:
        with open(args.step_log, "w") as f:
            json.dump(times, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
