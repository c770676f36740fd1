"""The analytics workloads of ``scalescope suite``, run in every rank by the launcher.

    torchrun --nproc-per-node 2 -m scalescope.bench.analytics_workload kmeans --rows 100000

Each rank makes its shard of a generated data set (``scalescope.bench.tables``), the ranks
fit PCA, K-Means or a linear SVM together over torch.distributed, and rank 0 writes the
timing and the fitted model to ``workload.json`` in the run directory, where tests compare
it with a single-process reference on the same rows.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

import torch
import torch.distributed as dist

from scalescope.bench import analytics
from scalescope.bench.rank_env import World, non_negative_int, positive_float, positive_int
from scalescope.bench.records import RUN_DIR_ENV, WorkloadRecord, write_record
from scalescope.bench.tables import make_rows, shard_of

KINDS = ("pca", "kmeans", "svm")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m scalescope.bench.analytics_workload",
        description="Distributed PCA, K-Means or linear SVM on generated data (under torchrun).",
    )
    p.add_argument("kind", choices=KINDS)
    p.add_argument("--rows", type=positive_int, default=200_000, help="rows over all ranks")
    p.add_argument("--features", type=positive_int, default=32, help="columns (default 32)")
    p.add_argument("--components", type=positive_int, default=4, help="pca (default 4)")
    p.add_argument("--clusters", type=positive_int, default=8, help="kmeans (default 8)")
    p.add_argument("--iterations", type=positive_int, default=10, help="kmeans Lloyd updates")
    p.add_argument("--repeats", type=positive_int, default=3, help="pca fits timed (default 3)")
    p.add_argument("--epochs", type=positive_int, default=2, help="svm passes (default 2)")
    p.add_argument("--batch-size", type=positive_int, default=256, help="svm rows per step")
    p.add_argument("--lr", type=positive_float, default=0.05, help="svm SGD learning rate")
    p.add_argument("--chunk-rows", type=positive_int, default=8192, help="rows per chunk")
    p.add_argument("--seed", type=non_negative_int, default=0, help="data set seed")
    return p


def check_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.kind == "pca" and args.components > args.features:
        parser.error(f"--components ({args.components}) exceeds --features ({args.features})")
    if args.kind == "kmeans" and args.clusters > args.rows:
        parser.error(f"--clusters ({args.clusters}) exceeds --rows ({args.rows})")


def check_world(args: argparse.Namespace, world: World) -> None:
    """What depends on the launch, not the options: raised, so the run records the reason."""
    if args.kind == "svm" and args.rows // world.world_size < args.batch_size:
        raise ValueError(
            f"--rows {args.rows} gives fewer rows per rank than one batch "
            f"({args.batch_size} x {world.world_size} ranks)"
        )


class Stopwatch:
    """Times the fit alone: set-up (a model, its lazy imports) and evaluation stay out.

    ``start`` waits for every rank, so the time is the group's, not one rank's head start.
    """

    def __init__(self) -> None:
        self.began: float | None = None
        self.seconds = 0.0

    def start(self) -> None:
        dist.barrier()
        self.began = time.perf_counter()

    def stop(self) -> None:
        assert self.began is not None, "stop before start"
        self.seconds = time.perf_counter() - self.began


def _fit_pca(
    args: argparse.Namespace, shard: torch.Tensor, watch: Stopwatch
) -> tuple[int, dict[str, Any]]:
    loader = analytics.chunks(shard, args.chunk_rows)
    watch.start()
    for _ in range(args.repeats):
        fit = analytics.pca(loader, args.features, args.components)
    watch.stop()
    result = {
        "mean": fit.mean.tolist(),
        "components": fit.components.tolist(),
        "explained_variance": fit.explained_variance.tolist(),
        "explained_variance_ratio": fit.explained_variance_ratio.tolist(),
    }
    return args.rows * args.repeats, result


def _fit_kmeans(
    args: argparse.Namespace, shard: torch.Tensor, watch: Stopwatch
) -> tuple[int, dict[str, Any]]:
    initial = make_rows("kmeans", 0, args.clusters, args.features, args.clusters, args.seed)
    loader = analytics.chunks(shard, args.chunk_rows)
    watch.start()
    fit = analytics.kmeans(loader, initial, args.iterations)
    watch.stop()
    result = {
        "initial": initial.tolist(),
        "centroids": fit.centroids.tolist(),
        "inertia": fit.inertia,
        "iterations": fit.iterations,
    }
    return args.rows * (args.iterations + 1), result


def held_out_rows(rows: int) -> int:
    """Held-out rows of the svm data set: the ``rows // 4`` rows after the training rows."""
    return max(rows // 4, 1)


def _fit_svm(
    args: argparse.Namespace, shard: torch.Tensor, watch: Stopwatch, world: World
) -> tuple[int, dict[str, Any]]:
    x, y = shard[:, :-1], shard[:, -1]
    steps = args.rows // world.world_size // args.batch_size
    model = analytics.svm_model(args.features, args.seed)
    watch.start()
    fit = analytics.svm(
        model, x, y, steps, args.epochs, args.batch_size, lr=args.lr, seed=args.seed
    )  # fmt: skip
    watch.stop()
    held_out = held_out_rows(args.rows)
    part = shard_of(held_out, world.rank, world.world_size)
    first, last = args.rows + part.start, args.rows + part.stop
    test = make_rows("svm", first, last, args.features, 1, args.seed)
    result = {
        "weight": fit.weight.tolist(),
        "bias": fit.bias,
        "steps": fit.steps,
        "train_accuracy": analytics.accuracy(fit, x, y),
        "test_rows": held_out,
        "test_accuracy": analytics.accuracy(fit, test[:, :-1], test[:, -1]),
    }
    return fit.steps * args.batch_size * world.world_size, result


def fit(args: argparse.Namespace, world: World) -> tuple[float, int, dict[str, Any]]:
    """Make this rank's shard, fit together; seconds of the fit, rows processed, the result."""
    part = shard_of(args.rows, world.rank, world.world_size)
    classes = args.clusters if args.kind == "kmeans" else 1
    shard = make_rows(args.kind, part.start, part.stop, args.features, classes, args.seed)
    watch = Stopwatch()
    if args.kind == "pca":
        items, result = _fit_pca(args, shard, watch)
    elif args.kind == "kmeans":
        items, result = _fit_kmeans(args, shard, watch)
    else:
        items, result = _fit_svm(args, shard, watch, world)
    return watch.seconds, items, result


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    check_args(parser, args)
    try:
        world = World.from_env()
    except ValueError as e:
        parser.error(str(e))
    check_world(args, world)
    torch.set_default_dtype(torch.float64)
    dist.init_process_group(backend="gloo")
    try:
        seconds, items, result = fit(args, world)
    finally:
        dist.destroy_process_group()
    if world.rank == 0:
        record = WorkloadRecord(
            workload=args.kind, world_size=world.world_size, size=args.rows, time_s=seconds,
            items=items, unit="rows", options=vars(args), result=result,
        )  # fmt: skip
        print(f"{args.kind}: {items / seconds:,.0f} rows/s over {world.world_size} ranks")
        if os.environ.get(RUN_DIR_ENV):
            write_record(os.environ[RUN_DIR_ENV], record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
