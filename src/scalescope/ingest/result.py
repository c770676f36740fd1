"""What an ingester returns: a Run in scalescope's own semantics plus what it found."""

from __future__ import annotations

from dataclasses import dataclass

from scalescope.events import Run
from scalescope.ingest.kineto_gpu import GpuActivity

KINETO = "kineto"
HOROVOD = "horovod"
FORMAT_NAMES = {
    KINETO: "torch.profiler (Kineto) Chrome trace",
    HOROVOD: "Horovod timeline",
}


class IngestError(ValueError):
    """The input cannot be analysed at all (not a trace, no events, ambiguous ranks)."""


@dataclass(frozen=True)
class HorovodPhase:
    """One row of the per-activity table of a Horovod timeline (chrome://tracing's summary)."""

    phase: str
    """Horovod's activity name: NEGOTIATE_ALLREDUCE, ALLREDUCE, MPI_ALLREDUCE, QUEUE, ..."""
    wall_ms: float
    """Sum of the durations of every completed occurrence."""
    self_ms: float
    """wall_ms minus the time of the activities nested directly inside it."""
    avg_wall_ms: float
    occurrences: int


@dataclass(frozen=True)
class HorovodWait:
    """Waiting versus transfer for one (op, tag, message size) of a Horovod timeline.

    Field names follow ``analyze.cross_rank.WaitStats``: NEGOTIATE_<OP> runs from the first
    rank's request for the tensor to the last one's, so it is the arrival skew (the wait);
    the MPI_/NCCL_/GLOO_/... activities inside the op are the transfer.
    """

    op: str
    tag: str
    nbytes: int
    instances: int
    """Completed op instances that had a negotiation."""
    skew_avg_us: float
    """Mean NEGOTIATE duration: last arrival minus first arrival."""
    skew_max_us: float
    wait_avg_us: float | None
    """Mean over instances and ranks of (last arrival - this rank's arrival), from the
    per-rank ready marks Horovod writes when a negotiation goes through the coordinator;
    None when no instance of this row has them (response cache hits have none)."""
    transfer_avg_us: float
    """Mean time of the MPI_/NCCL_/... activities of one instance."""
    wait_share_pct: float
    """skew / (skew + transfer) x 100."""


@dataclass(frozen=True)
class IngestResult:
    format: str
    """``kineto`` or ``horovod``."""
    run: Run
    """Events in the probe's semantics (docs/schema.md); ``run.problems`` = ``problems``."""
    problems: list[str]
    """Truncated files, missing ranks, files left out (mixed runs, not traces), ..."""
    files: tuple[str, ...]
    """The trace files that were read, in rank order."""
    horovod_phases: tuple[HorovodPhase, ...] = ()
    """Horovod only: per-activity table, largest wall time first."""
    horovod_waits: tuple[HorovodWait, ...] = ()
    """Horovod only: negotiation (wait) versus transfer by op and message size."""
    gpu: tuple[GpuActivity, ...] = ()
    """Kineto only: device activity and idle share of each rank that has device events."""

    @property
    def format_name(self) -> str:
        return FORMAT_NAMES.get(self.format, self.format)
