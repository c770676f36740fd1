"""A small DeepSpeed training script for the end-to-end tests, in DeepSpeed's own structure:
``deepspeed.initialize`` with a config dict, ``engine(x)``, ``engine.backward(loss)``,
``engine.step()``. It knows nothing of scalescope; CPU ranks over gloo.

The model is built by ``build_model`` so a test can count its parameters itself. With
``--accumulation`` above 1, ``engine.step()`` is called after every micro-batch and the
engine steps the optimizer at each accumulation boundary. At its end rank 0 prints one JSON
line: ``{"samples_per_rank": ..., "steps": ..., "step_ms": ...}`` by the script's own clock.
"""

import argparse
import json
import os
import time

import deepspeed
import torch
import torch.distributed as dist
from torch import nn

WIDTH, DEPTH, IN, CLASSES = 128, 7, 32, 10


def build_model() -> nn.Sequential:
    """A 7-layer MLP: ``DEPTH`` Linear layers (the first from IN, the last to CLASSES)."""
    torch.manual_seed(0)
    dims = [IN] + [WIDTH] * (DEPTH - 1) + [CLASSES]
    layers: list[nn.Module] = []
    for i in range(DEPTH):
        layers.append(nn.Linear(dims[i], dims[i + 1]))
        if i < DEPTH - 1:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def config(args: argparse.Namespace) -> dict:
    zero: dict = {"stage": args.stage}
    if args.stage == 3:
        zero["stage3_param_persistence_threshold"] = 0  # every layer gathered, none kept
    return {
        "train_micro_batch_size_per_gpu": args.micro_batch,
        "gradient_accumulation_steps": args.accumulation,
        "optimizer": {"type": "Adam", "params": {"lr": 1e-3, "torch_adam": True}},
        "zero_optimization": zero,
        "steps_per_print": 1_000_000,
        "wall_clock_breakdown": False,
    }


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--stage", type=int, default=3)
    p.add_argument("--steps", type=int, default=6, help="optimizer steps")
    p.add_argument("--micro-batch", type=int, default=32)
    p.add_argument("--accumulation", type=int, default=1)
    p.add_argument("--sleep-rank", type=int, default=-1, help="this rank is slow in forward")
    p.add_argument("--sleep-s", type=float, default=0.0, help="by this much a micro-batch")
    p.add_argument("--step-log", default="", help="JSON list of rank 0's optimizer steps (s)")
    return p.parse_args()


def skip_shm_build() -> None:
    """The CPU accelerator compiles its shared-memory all-reduce (a C++ JIT build, about 3
    minutes on 2 cores) when the backend starts; gloo does the same work here."""
    import importlib

    importlib.import_module("deepspeed.comm.torch").build_shm_op = lambda: None


def main() -> None:
    args = parse()
    skip_shm_build()
    deepspeed.init_distributed(dist_backend="gloo")
    model = build_model()
    if dist.get_rank() == args.sleep_rank and args.sleep_s > 0:
        model.register_forward_pre_hook(lambda *_: time.sleep(args.sleep_s))
    engine, _opt, _loader, _sched = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=config(args)
    )
    g = torch.Generator().manual_seed(1 + dist.get_rank())
    micro_steps = args.steps * args.accumulation
    samples, start = 0, time.perf_counter()
    steps, last = [], start
    for micro in range(micro_steps):
        x = torch.randn(args.micro_batch, IN, generator=g)
        y = torch.randint(0, CLASSES, (args.micro_batch,), generator=g)
        loss = nn.functional.cross_entropy(engine(x), y)
        engine.backward(loss)
        engine.step()
        samples += x.shape[0]
        if (micro + 1) % args.accumulation == 0:
            now = time.perf_counter()
            steps.append(now - last)
            last = now
    elapsed = time.perf_counter() - start
    if dist.get_rank() == 0:
        out = {
            "samples_per_rank": samples,
            "steps": args.steps,
            "step_ms": elapsed * 1e3 / args.steps,
        }
        print(json.dumps(out), flush=True)
        if args.step_log:
            with open(args.step_log, "w") as f:
                json.dump(steps, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    main()
