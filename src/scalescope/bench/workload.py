"""The bench training script, run in every rank by torch's elastic launcher.

    torchrun --nproc-per-node 2 -m scalescope.bench.workload resnet50 --steps 50

It trains a torchvision model with DistributedDataParallel on synthetic images or an
ImageFolder. Rank 0 prints tf_cnn_benchmarks-style throughput lines and, when
SCALESCOPE_RUN_DIR is set, writes bench.json there. The training loop is deliberately plain:
scalescope's probe hooks DataLoader iteration, the DDP forward, `torch.autograd.backward`
and `optimizer.step` from outside.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset

from scalescope.bench.data import (
    SyntheticImages,
    build_loader,
    image_folder,
    train_transforms,
)
from scalescope.bench.data_check import validate_data
from scalescope.bench.models import validate_model
from scalescope.bench.options import DEFAULT_BATCH, FSDP_CHANNELS_LAST, per_rank_batch
from scalescope.bench.progress import Display, StepReporter
from scalescope.bench.rank_env import (
    World,
    non_negative_int,
    pick_device,
    positive_float,
    positive_int,
)
from scalescope.bench.shard_manifest import is_shard_dir
from scalescope.bench.shards import shard_loader
from scalescope.bench.throughput import HEADER, format_total, throughput
from scalescope.bench.training import DEFAULT_LR, Training, build_training
from scalescope.events.files import BENCH_FILE
from scalescope.recipes import RECIPES

RUN_DIR_ENV = "SCALESCOPE_RUN_DIR"
DEFAULT_SYNTHETIC_IMAGES = 2560


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m scalescope.bench.workload",
        description="Data-parallel training benchmark of a torchvision model (run under torchrun).",
    )
    p.add_argument("model", help="torchvision classification model, e.g. resnet50")
    p.add_argument("--batch-size", type=positive_int, help=f"per rank (default {DEFAULT_BATCH})")
    p.add_argument(
        "--global-batch", type=positive_int, help="images per step over all ranks, split evenly"
    )
    p.add_argument(
        "--recipe",
        choices=sorted(RECIPES),
        help="large-batch recipe: LR scaling, warmup, optimizer, label smoothing",
    )
    p.add_argument("--image-size", type=positive_int, default=224, help="default 224")
    length = p.add_mutually_exclusive_group()
    length.add_argument(
        "--steps", type=positive_int, help="optimizer steps, warmup included (default 50)"
    )
    length.add_argument(
        "--epochs", type=positive_int, help="passes over the data instead of --steps"
    )
    p.add_argument(
        "--warmup-steps",
        type=non_negative_int,
        default=5,
        help="left out of throughput (default 5)",
    )
    p.add_argument(
        "--lr",
        type=positive_float,
        help=f"SGD learning rate, momentum 0.9 (default {DEFAULT_LR}); with --recipe, the "
        "base rate at the recipe's base batch (default: the recipe's)",
    )
    p.add_argument("--channels-last", action="store_true", help="channels_last memory format")
    p.add_argument("--bf16", action="store_true", help="bfloat16 autocast")
    p.add_argument(
        "--fsdp",
        action="store_true",
        help="FSDP2: fully_shard on each block, then on the model, instead of DDP",
    )
    p.add_argument(
        "--bucket-cap-mb", type=positive_float, default=25.0, help="DDP bucket size (default 25)"
    )
    p.add_argument("--seed", type=non_negative_int, default=0, help="default 0")
    p.add_argument(
        "--display-every", type=positive_int, default=10, help="steps between lines (default 10)"
    )
    _add_data_options(p)
    return p


def _add_data_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--data",
        metavar="DIR",
        help="ImageFolder DIR/<class>/<image> or shards of `scalescope data pack` "
        "(default: synthetic)",
    )
    p.add_argument(
        "--workers",
        type=non_negative_int,
        help="loader workers per rank (default: 0 synthetic, 2 --data)",
    )
    p.add_argument("--pin-memory", action="store_true", help="pin loader memory")
    p.add_argument(
        "--num-classes", type=positive_int, default=1000, help="synthetic data (default 1000)"
    )
    p.add_argument(
        "--synthetic-images",
        type=positive_int,
        help="synthetic epoch length (default: steps x batch x ranks; "
        f"{DEFAULT_SYNTHETIC_IMAGES} with --epochs)",
    )


def parse_args(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Parsed options with defaults that depend on others filled in; exits 2 on bad options."""
    args = parser.parse_args(argv)
    try:
        validate_model(args.model)
        if args.data is not None:
            args.num_classes = validate_data(args.data)
    except ValueError as e:
        parser.error(str(e))
    if args.steps is None and args.epochs is None:
        args.steps = 50
    if args.steps is not None and args.warmup_steps >= args.steps:
        parser.error(
            f"--warmup-steps ({args.warmup_steps}) must be less than --steps ({args.steps})"
        )
    if args.workers is None:
        args.workers = 0 if args.data is None else 2
    if args.global_batch is None:
        args.batch_size = args.batch_size or DEFAULT_BATCH
    elif args.batch_size is not None:
        parser.error("give --batch-size (per rank) or --global-batch, not both")
    if args.fsdp and args.channels_last:
        parser.error(FSDP_CHANNELS_LAST)
    if args.lr is None and args.recipe is None:
        args.lr = DEFAULT_LR
    return args


def make_dataset(args: argparse.Namespace, world: World) -> Dataset:
    if args.data is not None:
        return image_folder(args.data, args.image_size)
    length = args.synthetic_images
    if length is None:
        length = (
            DEFAULT_SYNTHETIC_IMAGES
            if args.epochs
            else args.steps * args.batch_size * world.world_size
        )
    return SyntheticImages(length, args.image_size, args.num_classes, seed=args.seed)


def make_loader(args: argparse.Namespace, world: World) -> DataLoader:
    """This rank's loader: over shards when --data is a shard directory, else a sampler's."""
    if args.data is not None and is_shard_dir(args.data):
        return shard_loader(
            args.data, batch_size=args.batch_size, workers=args.workers,
            pin_memory=args.pin_memory, seed=args.seed, rank=world.rank,
            world_size=world.world_size, transform=train_transforms(args.image_size),
        )  # fmt: skip
    return build_loader(
        make_dataset(args, world),
        args.batch_size,
        args.workers,
        args.pin_memory,
        args.seed,
        world.rank,
        world.world_size,
    )


def set_epoch(loader: DataLoader, epoch: int) -> None:
    """A new shuffle for ``epoch`` (shard loaders reshuffle by themselves)."""
    if hasattr(loader.sampler, "set_epoch"):
        loader.sampler.set_epoch(epoch)


def total_steps(
    parser: argparse.ArgumentParser, args: argparse.Namespace, loader: DataLoader, world_size: int
) -> int:
    """Steps to run: --steps, or --epochs times the loader length (checked against the warmup)."""
    per_epoch = len(loader)
    if per_epoch == 0:
        parser.error(
            f"--data {args.data}: too few images for one batch per rank "
            f"({args.batch_size} x {world_size} ranks)"
        )
    if args.steps is not None:
        return args.steps
    steps = args.epochs * per_epoch
    if args.warmup_steps >= steps:
        parser.error(
            f"--warmup-steps ({args.warmup_steps}) must be less than the {steps} steps "
            f"of --epochs {args.epochs}"
        )
    return steps


def train(
    training: Training, loader: DataLoader, args: argparse.Namespace, reporter: StepReporter
) -> None:
    model, optimizer, criterion = training.model, training.optimizer, training.criterion
    device = reporter.device
    memory_format = torch.channels_last if args.channels_last else torch.preserve_format
    step = 0
    for epoch in itertools.count():
        set_epoch(loader, epoch)
        for images, labels in loader:
            images = images.to(device, non_blocking=True, memory_format=memory_format)
            labels = labels.to(device, non_blocking=True)
            reporter.compute_starts()
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.bf16):
                out = model(images)
                loss = criterion(out, labels)
            loss.backward()
            optimizer.step()
            if training.scheduler is not None:
                training.scheduler.step()
            reporter.after_step(loss)
            step += 1
            if step == reporter.total:
                return


def bench_record(
    args: argparse.Namespace, world: World, reporter: StepReporter, training: Training
) -> dict[str, Any]:
    """The content of bench.json. `step_times_s` holds every step, the warmup ones first."""
    stats = throughput(reporter.step_times[reporter.warmup :], reporter.images_per_step)
    assert reporter.last_loss is not None
    final_loss = reporter.last_loss.item()
    return {
        "model": args.model,
        "world_size": world.world_size,
        "batch_size": args.batch_size,
        "global_batch_size": reporter.images_per_step,
        "image_size": args.image_size,
        "data": "synthetic" if args.data is None else os.path.abspath(args.data),
        "steps": reporter.total,
        "warmup_steps": reporter.warmup,
        "images_per_sec": stats.images / stats.seconds,
        "images_per_sec_mean": stats.mean,
        "images_per_sec_ci": stats.ci,
        "images_per_sec_jitter": stats.jitter,
        "step_times_s": reporter.step_times,
        "compute_times_s": reporter.compute_times,
        "cuda_max_memory_allocated": cuda_peak_bytes(reporter.device),
        "final_loss": final_loss if math.isfinite(final_loss) else None,
        "options": {
            "channels_last": args.channels_last,
            "bf16": args.bf16,
            "bucket_cap_mb": args.bucket_cap_mb,
            "fsdp": args.fsdp,
            "workers": args.workers,
            "pin_memory": args.pin_memory,
            "lr": training.lr,
            "recipe": args.recipe,
            "lr_warmup_steps": training.lr_warmup_steps,
            "label_smoothing": getattr(training.criterion, "label_smoothing", 0.0),
            "optimizer": type(training.optimizer).__name__,
            "seed": args.seed,
        },
    }


def cuda_peak_bytes(device: torch.device) -> int | None:
    """torch.cuda.max_memory_allocated at the end of the run: the run's peak without the
    probe, the last step's with it (the probe resets the peak every step); None on a CPU."""
    if device.type != "cuda":
        return None
    return int(torch.cuda.max_memory_allocated(device))


def write_bench_json(run_dir: str, record: dict[str, Any]) -> Path:
    """Write bench.json atomically, so a reader never sees half a file."""
    path = Path(run_dir) / BENCH_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=2) + "\n")
    os.replace(tmp, path)
    return path


def describe(
    args: argparse.Namespace, world: World, backend: str, device: torch.device, steps: int
) -> str:
    data = "synthetic" if args.data is None else args.data
    return (
        f"Model: {args.model}  Batch size: {args.batch_size} per rank, "
        f"{args.batch_size * world.world_size} global  Image size: {args.image_size}  "
        f"Data: {data}  Ranks: {world.world_size} ({backend}, {device.type})  "
        f"Steps: {steps} ({args.warmup_steps} warmup)"
    )


def describe_recipe(name: str, training: Training) -> str:
    return (
        f"Recipe: {name}  Optimizer: {type(training.optimizer).__name__}  "
        f"Peak LR: {training.lr:g} after {training.lr_warmup_steps} warmup steps  "
        f"Label smoothing: {getattr(training.criterion, 'label_smoothing', 0.0):g}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parse_args(parser, argv)
    try:
        world = World.from_env()
        args.batch_size = per_rank_batch(args.batch_size, args.global_batch, world.world_size)
    except ValueError as e:
        parser.error(str(e))
    loader = make_loader(args, world)
    steps = total_steps(parser, args, loader, world.world_size)
    try:
        device = pick_device(world)
    except ValueError as e:
        parser.error(str(e))
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend=backend)
    try:
        run(args, world, loader, steps, backend, device)
    finally:
        dist.destroy_process_group()
    return 0


def run(
    args: argparse.Namespace,
    world: World,
    loader: DataLoader,
    steps: int,
    backend: str,
    device: torch.device,
) -> None:
    global_batch = args.batch_size * world.world_size
    training = build_training(args, device, global_batch, len(loader), steps)
    with Display(world.rank == 0, steps, args.model) as display:
        display.line(describe(args, world, backend, device, steps))
        if args.recipe:
            display.line(describe_recipe(args.recipe, training))
        display.line("Running warm up" if args.warmup_steps else HEADER)
        reporter = StepReporter(
            display,
            device,
            args.warmup_steps,
            steps,
            args.batch_size * world.world_size,
            args.display_every,
        )
        train(training, loader, args, reporter)
    if world.rank != 0:
        return
    record = bench_record(args, world, reporter, training)
    display.line(format_total(record["images_per_sec"]))
    run_dir = os.environ.get(RUN_DIR_ENV)
    if run_dir:
        write_bench_json(run_dir, record)


if __name__ == "__main__":
    sys.exit(main())
