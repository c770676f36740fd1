"""The sequence workloads of ``scalescope suite``: an LSTM or a transformer block trained
with DistributedDataParallel on synthetic tokens (next-token prediction), run in every rank.

    torchrun --nproc-per-node 2 -m scalescope.bench.sequence_workload lstm --hidden 256

Rank 0 prints the throughput in tokens/s and writes ``workload.json`` to the run directory.
The loop is as plain as the bench's: the probe hooks it from outside.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader

from scalescope.bench.progress import Display, StepReporter
from scalescope.bench.rank_env import (
    World,
    non_negative_int,
    pick_device,
    positive_float,
    positive_int,
)
from scalescope.bench.records import RUN_DIR_ENV, WorkloadRecord, write_record
from scalescope.bench.sequence_models import (
    SEQUENCE_MODELS,
    SyntheticTokens,
    build_sequence_model,
    token_loader,
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m scalescope.bench.sequence_workload",
        description="Data-parallel training of an LSTM or a transformer block on synthetic tokens.",
    )
    p.add_argument("model", choices=SEQUENCE_MODELS)
    p.add_argument("--hidden", type=positive_int, default=256, help="model width (default 256)")
    p.add_argument("--seq-len", type=positive_int, default=64, help="tokens per sequence")
    p.add_argument("--vocab", type=positive_int, default=1000, help="vocabulary (default 1000)")
    p.add_argument("--batch-size", type=positive_int, default=16, help="sequences per rank")
    p.add_argument("--steps", type=positive_int, default=30, help="warm-up included")
    p.add_argument("--warmup-steps", type=non_negative_int, default=3, help="default 3")
    p.add_argument("--lr", type=positive_float, default=0.01, help="SGD learning rate")
    p.add_argument("--seed", type=non_negative_int, default=0)
    return p


def parse_args(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    args = parser.parse_args(argv)
    if args.warmup_steps >= args.steps:
        parser.error(
            f"--warmup-steps ({args.warmup_steps}) must be less than --steps ({args.steps})"
        )
    if args.model == "transformer" and args.hidden % 4:
        parser.error(f"the transformer's --hidden must be a multiple of 4, got {args.hidden}")
    return args


def train(
    args: argparse.Namespace, model: nn.Module, loader: DataLoader, reporter: StepReporter
) -> None:
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    epoch = 0
    while len(reporter.step_times) < args.steps:
        loader.sampler.set_epoch(epoch)
        for tokens, targets in loader:
            tokens, targets = tokens.to(reporter.device), targets.to(reporter.device)
            reporter.compute_starts()
            optimizer.zero_grad(set_to_none=True)
            logits = model(tokens)
            loss = criterion(logits.flatten(0, 1), targets.flatten())
            loss.backward()
            optimizer.step()
            reporter.after_step(loss)
            if len(reporter.step_times) == args.steps:
                return
        epoch += 1


def record(args: argparse.Namespace, world: World, reporter: StepReporter) -> WorkloadRecord:
    measured = reporter.step_times[args.warmup_steps :]
    tokens_per_step = args.batch_size * args.seq_len * world.world_size
    assert reporter.first_loss is not None and reporter.last_loss is not None
    losses = {"first_loss": reporter.first_loss.item(), "final_loss": reporter.last_loss.item()}
    return WorkloadRecord(
        workload=args.model, world_size=world.world_size, size=args.hidden,
        time_s=sum(measured), items=len(measured) * tokens_per_step, unit="tokens",
        options=vars(args), result=losses,
    )  # fmt: skip


def run(args: argparse.Namespace, world: World, device: torch.device) -> WorkloadRecord:
    torch.manual_seed(args.seed)
    model = build_sequence_model(args.model, args.vocab, args.hidden, args.seq_len).to(device)
    ddp = DistributedDataParallel(
        model, device_ids=[device.index] if device.type == "cuda" else None
    )
    dataset = SyntheticTokens(
        args.steps * args.batch_size * world.world_size, args.seq_len, args.vocab, args.seed
    )
    loader = token_loader(dataset, args.batch_size, args.seed, world.rank, world.world_size)
    tokens_per_step = args.batch_size * args.seq_len * world.world_size
    with Display(False, args.steps, args.model) as display:
        reporter = StepReporter(
            display, device, args.warmup_steps, args.steps, tokens_per_step, args.steps
        )  # fmt: skip
        train(args, ddp, loader, reporter)
    return record(args, world, reporter)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parse_args(parser, argv)
    try:
        world = World.from_env()
    except ValueError as e:
        parser.error(str(e))
    try:
        device = pick_device(world)
    except ValueError as e:
        parser.error(str(e))
    dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    try:
        result = run(args, world, device)
    finally:
        dist.destroy_process_group()
    if world.rank == 0:
        print(f"{args.model}: {result.throughput:,.0f} tokens/s over {world.world_size} ranks")
        if os.environ.get(RUN_DIR_ENV):
            write_record(os.environ[RUN_DIR_ENV], result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
