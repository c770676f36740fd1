"""What a renderer takes when one result is not enough, pyinstrument's ``Session``: results
gathered by the caller (api/reporting.py), never computed here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # types only: the data tools import torch, a subject must not
    from scalescope.analyze import RunAnalysis
    from scalescope.analyze.comm.comm_bench import CommBenchmark, CommRow
    from scalescope.analyze.live import LiveSnapshot
    from scalescope.analyze.pipeline_step import PipelineStep
    from scalescope.analyze.rank_steps import RankStepGrid
    from scalescope.analyze.runs.compare import RunComparison
    from scalescope.analyze.scale.node_grid import NodeGrid
    from scalescope.analyze.scale.summary import ScaleAnalysis
    from scalescope.analyze.verdict import Verdict
    from scalescope.bench.shard_manifest import Manifest
    from scalescope.data.speed import Ratio, Speed
    from scalescope.data.stage import StageResult
    from scalescope.diagnose.env_checks import EnvWarning
    from scalescope.diagnose.findings import Diagnosis
    from scalescope.events import Run
    from scalescope.events.live_state import LiveState
    from scalescope.ingest import IngestResult
    from scalescope.predict.stored import DashboardProjection


@dataclass(frozen=True, kw_only=True)
class RunReport:
    """One run's report: the analysis, its findings and what the dashboard and the timeline
    draw beside them."""

    analysis: RunAnalysis
    run: Run
    """The events the timeline draws."""
    diagnosis: Diagnosis | None = None
    offsets_ns: Mapping[int, int] = field(default_factory=dict)
    """Each rank's clock offset to rank 0 (``analyze.ranks.clocks.clock_offsets``)."""
    grid: RankStepGrid | None = None
    """The dashboard's ranks x steps heatmaps (``analyze.rank_steps.rank_step_grid``)."""
    projection: DashboardProjection | None = None
    """The projection `project` stored in the run directory (``predict.stored``)."""
    steps: range | None = None
    """The timelines' steps (default: a few after warm-up)."""
    ranks: str | None = None
    """``--ranks`` of the timeline (report/views/rank_select.py)."""
    ingest: IngestResult | None = None
    """What ingesting another tool's trace found; its JSON holds it as ``ingest``."""

    @cached_property
    def pipeline_step(self) -> PipelineStep | None:
        """The dashboard's step of each pipeline stage (``analyze.pipeline_step``); None
        without a pipeline. Gathered here on first use until api/reporting.run_report, which
        issue 48 rewrites, passes it."""
        from scalescope.analyze.pipeline_step import pipeline_step

        pipe = self.analysis.pipeline
        if pipe is None:
            return None
        return pipeline_step(self.run, pipe, self.analysis.warmup_steps, self.offsets_ns)


@dataclass(frozen=True, kw_only=True)
class ComparedRuns:
    """Two runs' analyses and their comparison: the compare page."""

    comparison: RunComparison
    a: RunAnalysis
    b: RunAnalysis


@dataclass(frozen=True, kw_only=True)
class CommRun:
    """A comm benchmark and the run directory its JSON names."""

    bench: CommBenchmark
    run_dir: Path


@dataclass(frozen=True, kw_only=True)
class NcclTestsRows:
    """An nccl-tests log in comm's columns (``comm --nccl-tests``)."""

    rows: Sequence[CommRow]
    title: str


@dataclass(frozen=True, kw_only=True)
class EnvReport:
    """``scalescope env``: the machine's facts and the traps found in them."""

    facts: dict[str, Any]
    warnings: list[EnvWarning]
    gpu_peaks: tuple[dict[str, Any] | None, ...] = ()
    """The catalogue's peaks of each GPU of the facts, in their order
    (``predict.catalogue.gpu_peaks``; None: not in the catalogue)."""

    def __post_init__(self) -> None:
        gpus = len((self.facts.get("hardware") or {}).get("gpus") or [])
        if gpus != len(self.gpu_peaks):
            raise ValueError(f"EnvReport: {gpus} GPUs in the facts, {len(self.gpu_peaks)} peaks")


@dataclass(frozen=True, kw_only=True)
class PackedShards:
    """``data pack``: the manifest written and the directory it went to."""

    manifest: Manifest
    out: str


@dataclass(frozen=True, kw_only=True)
class StagedShards:
    """``data stage``: what this node did, and the shard directory it staged from."""

    result: StageResult
    source: str


@dataclass(frozen=True, kw_only=True)
class LoaderSpeeds:
    """``data bench``: each path's images/s, and shards against folders."""

    speeds: Sequence[Speed]
    ratios: Sequence[Ratio]
    cold: bool = False


@dataclass(frozen=True)
class LiveExtras:
    """What the live view shows beside the snapshot."""

    finding: str | None = None
    """The diagnosis' first finding so far, as one phrase."""
    output: Sequence[str] = ()
    """The last lines of the script's output (``run --live``)."""
    note: str = ""
    alert: str | None = None
    """The slowdown watch's open alert (or its last recovery), as its message."""
    stopped: Sequence[str] = ()
    """A sentence per watch of the launcher that stopped on an error (events/watch_stops.py)."""


@dataclass(frozen=True, kw_only=True)
class LiveFrame:
    """One frame of ``top`` on a run directory (live/run_view.py)."""

    snapshot: LiveSnapshot
    extras: LiveExtras = LiveExtras()


@dataclass(frozen=True)
class StoreRank:
    """A rank as ``top --connect`` read it from the job's store."""

    state: LiveState
    host: str
    steps_per_s: float | None
    """Since the previous frame."""
    ended: str


@dataclass(frozen=True)
class StoreSummary:
    """The head of a ``top --connect`` frame read from the nodes' records (where the rows
    are only the ranks worth showing): how many ranks report, on how many nodes, their
    steps, the slowest node's rate, how many are starting and have ended."""

    reporting: int
    nodes: int
    steps_min: int
    steps_max: int
    steps_per_s: float | None
    starting: int
    ended: int

    @classmethod
    def of_ranks(cls, ranks: Sequence[StoreRank]) -> StoreSummary:
        """The head of ranks whose states were read."""
        steps = [r.state.steps_done for r in ranks]
        rates = [r.steps_per_s for r in ranks if r.steps_per_s is not None]
        return cls(
            reporting=len(ranks), nodes=len({r.host for r in ranks if r.host}),
            steps_min=min(steps, default=0), steps_max=max(steps, default=0),
            steps_per_s=min(rates) if rates else None,
            starting=sum(r.state.starting and not r.ended for r in ranks),
            ended=sum(bool(r.ended) for r in ranks),
        )  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class StoreFrame:
    """One frame of ``top --connect`` (live/store_view.py): the ranks reporting, the hang
    verdict (``stall``) once nothing progressed, the slowdown alert, and ``unknown``: ranks
    (and their hosts) whose state did not open with this job's seal."""

    ranks: Sequence[StoreRank]
    world: int
    now: float
    stall: str | None = None
    alert: str | None = None
    unknown: Sequence[tuple[int, str]] = ()
    stopped: Sequence[str] = ()
    """A sentence per watch of the store's owner that stopped on an error."""
    summary: StoreSummary | None = None
    """From the nodes' records; None where every rank's state was read (the head is theirs)."""
    unknown_nodes: Sequence[int] = ()
    """The relays whose node record did not open with this job's seal."""


@dataclass(frozen=True, kw_only=True)
class ScaleReport:
    """A run analysed from its node files and its verdict (report/views/scale.py)."""

    analysis: ScaleAnalysis
    verdict: Verdict
    grid: NodeGrid | None = None
    """The dashboard's nodes by sampled step and distributions (analyze/scale/node_grid.py)."""
