"""The options of the commands that read what was recorded or found: report, analyze,
compare, env, top and project."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from scalescope.commands.options.shared import (
    BASELINE,
    CONNECT,
    GLOBAL_BATCH,
    JSON,
    NODES,
    RANK,
    RANKS,
    STEPS,
    THRESHOLD,
    TIMELINE,
)
from scalescope.launch.options.fields import HTML, NPROC, argument, option


@dataclass(frozen=True, kw_only=True)
class ReportOutputs:
    """What ``report`` and ``analyze`` write, and how they judge: their shared options."""

    json_file: Path | None = JSON()
    """Also write the report as JSON."""
    html: Path | None = HTML()
    """Also write the HTML dashboard."""
    timeline: Path | None = TIMELINE()
    """Also write a Chrome/Perfetto trace of a few steps."""
    steps: int | None = STEPS()
    """Steps in the timelines (default: 10 after warm-up)."""
    ranks: str | None = RANKS()
    """Ranks in the --timeline trace: N, A-B, worst:K, best:K or all, comma-separated (e.g.
    0,worst:8,best:4,5-7; slowest by busy time per step). Default: every rank up to 16 ranks,
    else 0,worst:8,best:4."""
    threshold: tuple[str, ...] | None = THRESHOLD()
    """Set a diagnosis threshold, NAME=VALUE (repeat), e.g. data_share_pct=20; names in
    docs/diagnosis.md."""
    baseline: Path | None = BASELINE()
    """A good bench run on this machine: its FLOP/s become the expected ones."""


@dataclass(frozen=True, kw_only=True)
class ReportCommand(ReportOutputs):
    """The options of ``scalescope report``."""

    run_dir: Path = argument()
    """A run directory written by run or bench, a study directory of scale, or a suite
    directory of suite (or its suite.json)."""
    rank: int | None = RANK()
    """Also print rank N's detail, read from its rank file alone (a run analysed from node
    files keeps rank files of sampled ranks only)."""


@dataclass(frozen=True, kw_only=True)
class AnalyzeCommand(ReportOutputs):
    """The options of ``scalescope analyze``."""

    path: Path = argument()
    """A torch.profiler trace (file or per-rank directory) or a Horovod timeline."""


@dataclass(frozen=True, kw_only=True)
class CompareCommand:
    """The options of ``scalescope compare``."""

    run_a: Path = argument()
    """The baseline run directory."""
    run_b: Path = argument()
    """The run to compare with it."""
    json_file: Path | None = JSON()
    """Also write the comparison."""
    html: Path | None = HTML()
    """Also write a side-by-side dashboard."""


@dataclass(frozen=True, kw_only=True)
class EnvCommand:
    """The options of ``scalescope env``."""

    json_file: Path | None = JSON()
    """Also write the facts as JSON."""
    nproc_per_node: int | None = NPROC(min=None)
    """Ranks per node you plan, for the thread checks."""


@dataclass(frozen=True, kw_only=True)
class TopCommand:
    """The options of ``scalescope top``."""

    run_dir: Path | None = argument(None)
    """A run directory (of run, bench, a scale size)."""
    connect: str | None = CONNECT()
    """Watch through the job's store instead (MASTER_ADDR:MASTER_PORT under srun or mpirun,
    the --rdzv-endpoint on several nodes): from any node, no run directory."""
    once: bool = option("--once", default=False)
    """Print the view once and exit."""


@dataclass(frozen=True, kw_only=True)
class FlushCommand:
    """The options of ``scalescope flush``."""

    run_dir: Path | None = argument(None)
    """The directory of a run in progress on this node."""
    connect: str | None = CONNECT()
    """Ask every rank through the job's store instead (as top --connect), sealed with your
    key for the job."""
    rank: int | None = RANK()
    """Ask this rank only (with a run directory)."""
    wait_s: float = option("--wait", default=30.0, min=0.0)
    """Seconds to wait for the ranks' answers."""


@dataclass(frozen=True, kw_only=True)
class ProjectCommand:
    """The options of ``scalescope project``."""

    run_dir: Path | None = argument(None)
    """A run directory written by run or bench, or a scale study (its largest size); or give
    --validate."""
    nodes: str = NODES("1,2,4,8")
    """Node counts to project, e.g. 1,2,4,8."""
    ranks_per_node: int | None = option("--ranks-per-node")
    """Ranks per node (default: the run's, or per GPU/NUMA)."""
    hardware: str | None = option("--hardware")
    """Target: a64fx, xeon-8380, epyc-7763, v100, a100, h100, h200 or FILE.toml (default: the
    machine of the run)."""
    comm: Path | None = option("--comm")
    """α-β fits for the allreduce: `scalescope comm --json` file or comm run directory."""
    global_batch: int | None = GLOBAL_BATCH()
    """Strong scaling: this global batch at every size."""
    per_rank_batch: int | None = option("--per-rank-batch")
    """Weak scaling with this batch per rank (default: run's)."""
    algorithm: str = option("--algorithm", default="ring")
    """Allreduce: ring or tree."""
    epoch_samples: int = option("--epoch-samples", default=1_281_167)
    """Samples per epoch (ImageNet-1k's training set)."""
    efficiency: float | None = option("--efficiency")
    """With --hardware: fraction of its roofline (default: as here)."""
    model: str | None = option("--model")
    """Another bench model of the same input (resnet18, ...), projected with the fraction of
    peak this run reached (a GPU run, or give --hardware)."""
    validate: Path | None = option("--validate")
    """A scale study: fit on the smaller sizes, predict the largest."""
    holdout: int = option("--holdout", default=1)
    """Largest sizes held out by --validate."""
    json_file: Path | None = JSON()
    """Also write the result as JSON."""
    html: Path | None = HTML()
    """Also write the projection as HTML."""


@dataclass(frozen=True, kw_only=True)
class WhatIfCommand:
    """The options of ``scalescope whatif``."""

    run_dir: Path = argument()
    """A run directory written by run or bench."""
    fix: tuple[str, ...] | None = option("--fix", metavar="CAUSE")
    """A cause to fix (repeat): rank:N, node:HOST, phase:NAME (data, eval, checkpoint, ...),
    eval, checkpoint, compute:X, comm:X, comm:hidden; comm:X@dim:NAME or comm:X@tag:NAME
    (NAME[,NAME...]) only on a mesh dimension's groups or on a tag's collectives
    (comm:hidden@dim:tp, comm:x2@dim:tp, comm:hidden@tag:zero_gather_params); comm:fused
    (FSDP's units merged into one: fewer, larger calls); comm:dropped@tag:NAME (a tag's calls
    gone with the host work that builds them: comm:dropped@tag:user, the script's own
    per-step collectives; never a default); A+B fixes both at once. Default: the
    slowest node and ranks, input waits and rank-only work, exposed transfers, the first two
    together, then tp's and ZeRO's collectives hidden or faster, and FSDP's units merged."""
    comm_speed: float | None = option("--comm-speed", min=0.0)
    """Also replay with every transfer this many times faster (a faster network)."""
    compute_speed: float | None = option("--compute-speed", min=0.0)
    """Also replay with every rank's own time this many times shorter (a faster chip)."""
    json_file: Path | None = JSON()
    """Also write the what-if as JSON."""
    timeline: Path | None = TIMELINE()
    """Also write a Chrome/Perfetto trace of the last 5 steps replayed as measured, above the
    same replayed with the first cause fixed (the largest gain, or the first --fix)."""
