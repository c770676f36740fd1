"""The options of the commands that start ranks: run, bench, comm, scale, suite and tune.
Each takes some groups of the launch options (``launch_groups``, less ``launch_skip``);
the others keep their defaults."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from scalescope.commands.options.shared import (
    BATCH_SIZE,
    BENCH,
    FSDP,
    GLOBAL_BATCH,
    IMAGE_SIZE,
    JSON,
    MODULE,
    NODES,
    RANKS,
    SEED,
    STEPS,
    WARMUP_STEPS,
    WORKERS,
)
from scalescope.launch.options.fields import HTML, NPROC, RUN_DIR, argument, group, option
from scalescope.launch.options.groups import ALL_GROUPS, LaunchConfig


@dataclass(frozen=True, kw_only=True)
class RunCommand:
    """The options of ``scalescope run``."""

    launch_groups: ClassVar[tuple[str, ...]] = ALL_GROUPS

    script: str = argument()
    """Training script (or module with -m)."""
    nproc_per_node: int | None = NPROC()
    """Ranks to start on this node (default: 1)."""
    module: bool = MODULE(False)
    """SCRIPT is a module name."""
    warmup_steps: int = WARMUP_STEPS(1)
    """Steps left out of the statistics."""
    args: tuple[str, ...] = ()
    """The script's own arguments."""
    launch: LaunchConfig = group(LaunchConfig)


@dataclass(frozen=True, kw_only=True)
class BenchCommand:
    """The options of ``scalescope bench``: the built-in workload's, then the launch's."""

    launch_groups: ClassVar[tuple[str, ...]] = ALL_GROUPS

    model: str = argument()
    """A torchvision classifier: resnet18, resnet50, ..."""
    nproc_per_node: int | None = NPROC()
    """Ranks to start on this node (default: 1)."""
    batch_size: int | None = BATCH_SIZE()
    """Images per rank per step (default 32)."""
    global_batch: int | None = GLOBAL_BATCH(min=1)
    """Images per step over all ranks (split evenly), instead of --batch-size."""
    recipe: str | None = option("--recipe")
    """Large-batch recipe: goyal or lars (LR scaling, warmup, optimizer)."""
    image_size: int = IMAGE_SIZE(224)
    """Height and width of the images."""
    steps: int | None = STEPS()
    """Steps to run (default 50)."""
    epochs: int | None = option("--epochs", min=1)
    """Epochs to run instead of --steps."""
    warmup_steps: int = WARMUP_STEPS(5)
    """Steps left out of the statistics."""
    lr: float | None = option("--lr")
    """SGD learning rate (default 0.01); with --recipe, its base rate."""
    channels_last: bool = option("--channels-last/--no-channels-last", default=False)
    """Use the channels_last memory format."""
    bf16: bool = option("--bf16/--no-bf16", default=False)
    """bfloat16 autocast."""
    bucket_cap_mb: float = option("--bucket-cap-mb", default=25.0, min=0.0)
    """DDP bucket size (MB)."""
    fsdp: bool = FSDP(False, off="--no-fsdp")
    """Shard with FSDP2 (fully_shard on each block, then the model) instead of DDP."""
    seed: int = SEED(0)
    """Random seed."""
    data: Path | None = option("--data")
    """An ImageFolder or shards of `data pack` (default: synthetic)."""
    workers: int | None = WORKERS(min=0)
    """Loader workers (default 0 synthetic, 2)."""
    pin_memory: bool = option("--pin-memory/--no-pin-memory", default=False)
    """Pin DataLoader memory."""
    launch: LaunchConfig = group(LaunchConfig)


@dataclass(frozen=True, kw_only=True)
class CommCommand:
    """The options of ``scalescope comm``."""

    launch_groups: ClassVar[tuple[str, ...]] = ("rendezvous", "nodes", "placement", "recording")
    launch_skip: ClassVar[tuple[str, ...]] = ("no_probe", "record")
    """--probe records every benchmarked call (``--record full``): no --record here."""

    nproc_per_node: int | None = NPROC()
    """Ranks to start on this node (default: 1)."""
    ops: str = option("--ops", default="allreduce")
    """Comma list: allreduce, allgather, reduce_scatter, broadcast, alltoall, sendrecv."""
    sizes: str = option("--sizes", default="8:64M")
    """MIN:MAX bytes stepped by --factor (8:256M), or a list 8,1M."""
    factor: int = option("--factor", default=2)
    """Size multiplier between MIN and MAX."""
    dtype: str = option("--dtype", default="float32")
    """float32, float64, float16, int32, ..."""
    backend: str = option("--backend", default="gloo,nccl,mpi")
    """Comma list; one this build lacks is listed unavailable."""
    iters: int = option("--iters", default=20, min=1)
    """Timed calls per size."""
    warmup: int = option("--warmup", default=5, min=0)
    """Untimed calls before them."""
    json_file: Path | None = JSON()
    """Write results and α-β fits."""
    csv_file: Path | None = option("--csv")
    """Write the rows as CSV."""
    html: Path | None = HTML()
    """Write latency and busbw plots."""
    nccl_tests: Path | None = option("--nccl-tests")
    """Only show an nccl-tests log in these columns; run nothing."""
    probe: bool = option("--probe", default=False)
    """Also record every benchmarked call with the probe (report RUN_DIR shows them); it adds
    ~20 µs to each call of a 2-rank gloo all_reduce."""
    launch: LaunchConfig = group(LaunchConfig)


@dataclass(frozen=True, kw_only=True)
class ScaleCommand:
    """The options of ``scalescope scale``."""

    launch_groups: ClassVar[tuple[str, ...]] = ("rendezvous", "nodes", "placement")
    launch_skip: ClassVar[tuple[str, ...]] = ("nnodes",)

    script: str | None = argument(None)
    """Training script (or use --bench MODEL)."""
    ranks: str = RANKS(...)
    """Sizes to run, e.g. 1,2,4."""
    nodes: str | None = NODES()
    """Nodes of each size, e.g. 1,1,2."""
    strong: bool = option("--strong", default=False)
    """Keep the global batch (default: weak)."""
    bench_model: str | None = BENCH()
    """A built-in model instead."""
    batch_size: int | None = BATCH_SIZE()
    """Per-rank batch (global with --strong); a script gets it where its args say {batch}."""
    steps: int = STEPS(20)
    """Steps per size (--bench)."""
    image_size: int = IMAGE_SIZE(224)
    """Image size (--bench)."""
    warmup_steps: int = WARMUP_STEPS(5)
    """Steps left out of the statistics."""
    study_dir: Path | None = RUN_DIR(None, "--study-dir")
    """Where the study's runs go (default: scalescope_runs/scale-…); --study-dir is its old
    name."""
    html: Path | None = HTML()
    """Write the scaling dashboard here."""
    args: tuple[str, ...] = ()
    """The script's own arguments ({batch}: the per-rank batch of each size)."""
    launch: LaunchConfig = group(LaunchConfig)


@dataclass(frozen=True, kw_only=True)
class SuiteCommand:
    """The options of ``scalescope suite``."""

    launch_groups: ClassVar[tuple[str, ...]] = ("rendezvous", "placement")
    launch_skip: ClassVar[tuple[str, ...]] = ("cpu_list",)

    quick: bool = option("--quick", default=False)
    """Tiny sizes and few steps (CI smoke run)."""
    ranks: str = RANKS("2")
    """Rank counts to run each workload at: 1,2."""
    workloads: str | None = option("--workloads")
    """Comma list of resnet50, lstm, transformer, pca, kmeans, svm (default: all)."""
    size: tuple[str, ...] | None = option("--size")
    """WORKLOAD=N, repeatable: image size (resnet50), hidden size (lstm, transformer) or rows
    (pca, kmeans, svm), e.g. kmeans=2000000."""
    suite_dir: Path | None = RUN_DIR(None, "--suite-dir")
    """Where to record the suite's runs (default: scalescope_runs/suite-…); --suite-dir is its
    old name."""
    json_file: Path | None = JSON()
    """Also write the table as JSON."""
    launch: LaunchConfig = group(LaunchConfig)


@dataclass(frozen=True, kw_only=True)
class TuneCommand:
    """The options of ``scalescope tune``."""

    launch_groups: ClassVar[tuple[str, ...]] = ("rendezvous", "placement")

    script: str | None = argument(None)
    """Training script (or module with -m)."""
    bench_model: str | None = BENCH()
    """Tune the built-in bench workload of this model instead."""
    nproc_per_node: int | None = NPROC()
    """Ranks to start on this node (default: 1)."""
    module: bool = MODULE(False)
    """SCRIPT is a module name."""
    space: tuple[str, ...] | None = option("--space")
    """A knob and its values, NAME=V1,V2 (repeat); see docs/tune.md."""
    trials: int = option("--trials", default=20)
    """Trials in the study, baseline included."""
    trial_seconds: float = option("--trial-seconds", default=60.0)
    """Time budget of one trial; then it is stopped."""
    budget: float | None = option("--budget")
    """Minutes after which no new trial starts."""
    sampler: str = option("--sampler", default="tpe")
    """tpe, gp, random or grid (exhaustive)."""
    no_prune: bool = option("--no-prune", default=False)
    """Never stop a slow trial early."""
    seed: int = SEED(0)
    """Seed of the sampler."""
    resume: bool = option("--resume", default=False)
    """Continue the study in --run-dir."""
    confirm: int = option("--confirm", default=3)
    """Run the baseline and the top K again after the search; 0: off."""
    confirm_rounds: int = option("--confirm-rounds", default=2)
    """Interleaved rounds of the confirmation runs."""
    warmup_steps: int = WARMUP_STEPS(5)
    """Steps of each trial left out of samples/s."""
    batch_size: int = BATCH_SIZE(32)
    """--bench: images per rank per step."""
    image_size: int = IMAGE_SIZE(224)
    """--bench: height and width of the images."""
    trial_steps: int = option("--trial-steps", default=200, min=2)
    """--bench: steps of one trial."""
    fsdp: bool = FSDP(False)
    """--bench: FSDP2 (fully_shard on each block) instead of DDP."""
    run_dir: Path | None = RUN_DIR()
    """The study's directory (default: scalescope_runs/tune-…)."""
    json_file: Path | None = JSON()
    """Also write every trial as JSON."""
    html: Path | None = HTML()
    """Also write the study's HTML page."""
    args: tuple[str, ...] = ()
    """The script's own arguments."""
    launch: LaunchConfig = group(LaunchConfig)
