"""What a live view shows of a run in progress, from the rows read so far.

Pure: the caller reads the files (``events.tail.RunTail``, ``events.live_state``) and says
which ranks are alive; this combines the window's analysis (the last steps of every rank)
with the running totals, each rank's own status file and its live state into one frozen
snapshot.

A rank that has not begun its first step is ``starting``, with its start stage (``import``,
``init_process_group``, ``model``) and how long it has been in it; it is never ``silent``.
``silent`` is a rank that wrote steps and then wrote nothing for SILENT_AFTER_S.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from scalescope.analyze.cross_rank import RankWaits
from scalescope.analyze.layouts.coordinates import RankPlace
from scalescope.analyze.step_histogram import StepHistogram, step_histogram
from scalescope.analyze.steps.steps import OTHER, PhaseStats, RankSteps
from scalescope.analyze.summary import RunAnalysis
from scalescope.events.live_state import IMPORT, RUNNING, LiveState
from scalescope.events.run import RankMeta, RunMeta
from scalescope.events.schema import PHASES
from scalescope.events.tail import RankTotals

LIVE_PHASES = (*PHASES, OTHER)
"""The phase split of a row: data, forward, backward, comm_wait (exposed comm), optimizer,
other."""
ENDED = ("completed", "failed", "killed", "interrupted")
DEAD = ("failed", "killed", "interrupted", "died")
SILENT_AFTER_S = 15.0
"""A running rank that wrote steps, then nothing for this long, is marked silent: ranks
flush every 20 steps or 5 s, so three missed flushes."""


@dataclass(frozen=True)
class RankLive:
    rank: int
    status: str
    """running, completed, failed, killed, interrupted, died (its process is gone without a
    word), silent (steps written, then no events for SILENT_AFTER_S) or starting (its first
    step not begun)."""
    steps: int
    step_ms: float | None
    """Mean step time over the window."""
    phases_ms: tuple[tuple[str, float], ...]
    """Mean ms per step of each of LIVE_PHASES that was measured."""
    waiting_ms: float | None
    """Time per step spent waiting for the last rank at collectives (None: not matched)."""
    memory_bytes: int | None
    silent_s: float | None
    last_words: str | None
    """The last line of its error, or why it is marked."""
    stage: str | None = None
    """While starting: import, init_process_group or model (None: not known)."""
    stage_for_s: float | None = None
    """While starting: how long it has been in ``stage`` (or starting, when that is None)."""
    on_cpu_pct: float | None = None
    """Share of its work's time (its phases but the exposed communication, which ``waiting_ms``
    tells) that its training thread was on a CPU; None without CPU rows. A slow rank low on
    it waits there (asleep, on I/O, runnable behind other work) rather than computes."""

    @property
    def status_words(self) -> str:
        """The status as the view shows it: ``starting (init_process_group, 12 s)``."""
        if self.status != "starting":
            return self.status
        parts = [self.stage] if self.stage else []
        if self.stage_for_s is not None:
            parts.append(f"{self.stage_for_s:.0f} s")
        return f"starting ({', '.join(parts)})" if parts else "starting"


@dataclass(frozen=True)
class LiveSnapshot:
    run_id: str
    status: str
    world_size: int
    elapsed_s: float | None
    steps_done: int
    """Steps every rank has finished (the slowest rank's count)."""
    samples_per_s_now: float | None
    """Over the window's steps (the last few of each rank), all ranks."""
    samples_per_s_mean: float | None
    """Since the first step, all ranks."""
    ranks: tuple[RankLive, ...]
    straggler: int | None
    straggler_phase: str | None
    places: Mapping[int, RankPlace] = field(default_factory=dict)
    """Each rank's pipeline stage and mesh coordinates (analyze/layouts/coordinates.py); empty for a
    job with neither, whose view has no column for them."""

    @cached_property
    def step_histogram(self) -> StepHistogram | None:
        """The ranks' step times in 12 bins (None with fewer than two)."""
        return step_histogram(r.step_ms for r in self.ranks)


def last_line(text: str | None) -> str | None:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else None


def started(meta: RankMeta | None, totals: RankTotals | None, live: LiveState | None) -> bool:
    """Whether the rank began its first step (a step-less script: entered a collective).

    Its live state's stage says so; without one (a file from before the stages, or none
    readable), the steps it wrote do; a rank run without the probe is taken as started once
    its status file exists (nothing tells more)."""
    if live is not None and live.stage:
        return live.stage == RUNNING
    if (totals is not None and totals.steps > 0) or (live is not None and live.steps_done > 0):
        return True
    return meta is not None and not meta.probe


def start_stage(
    meta: RankMeta | None, live: LiveState | None, run_start: float | None, now: float
) -> tuple[str | None, float | None]:
    """A starting rank's stage and seconds in it. With nothing written yet (no live state,
    no status file) the process is still importing: counted from the run's start."""
    if live is not None and live.stage:
        since = live.stage_since_s
        return live.stage, max(now - since, 0.0) if since else None
    if live is None and meta is None:
        return IMPORT, max(now - run_start, 0.0) if run_start else None
    since = meta.start_time if meta is not None and meta.start_time else run_start
    return None, max(now - since, 0.0) if since else None


def _status(
    meta: RankMeta | None,
    alive: bool | None,
    silent_s: float | None,
    totals: RankTotals | None = None,
    live: LiveState | None = None,
) -> str:
    if meta is not None and meta.status in ENDED:
        return meta.status
    if alive is False:
        return "died"
    if not started(meta, totals, live):
        return "starting"
    wrote = totals is not None and totals.steps > 0
    if wrote and silent_s is not None and silent_s > SILENT_AFTER_S:
        return "silent"
    return "running"


def _words(status: str, meta: RankMeta | None, silent_s: float | None) -> str | None:
    if status == "silent":
        return f"no events for {silent_s:.0f} s"
    if status not in DEAD:
        return None
    words = last_line(meta.error if meta else None)
    if words is None and meta is not None and meta.exit_code is not None:
        words = f"exit code {meta.exit_code}"
    return words or "its process ended without a word"


@dataclass(frozen=True)
class RankFigures:
    """The analysis' per-rank entries by rank, looked up once for all ranks (a search per
    rank would cost ranks squared: a million comparisons at 1,024 ranks, every frame)."""

    steps: dict[int, RankSteps]
    waits: dict[int, RankWaits]

    @classmethod
    def of(cls, analysis: RunAnalysis | None) -> RankFigures:
        steps = analysis.steps if analysis else None
        cross = analysis.cross_rank if analysis else None
        return cls(
            {r.rank: r for r in reversed(steps.ranks)} if steps else {},
            {w.rank: w for w in reversed(cross.ranks)} if cross else {},
        )


def rank_live(
    rank: int, analysis: RunAnalysis | None, totals: RankTotals | None, meta: RankMeta | None,
    alive: bool | None, silent_s: float | None, live: LiveState | None = None,
    run_start: float | None = None, now: float = 0.0, figures: RankFigures | None = None,
) -> RankLive:  # fmt: skip
    """``figures``: RankFigures.of(analysis), when the caller has it (many ranks)."""
    figures = figures or RankFigures.of(analysis)
    own = figures.steps.get(rank)
    cross = analysis.cross_rank if analysis else None
    waits = figures.waits.get(rank) if cross else None
    status = _status(meta, alive, silent_s, totals, live)
    stage, stage_for_s = None, None
    if status == "starting":
        stage, stage_for_s = start_stage(meta, live, run_start, now)
    measured = own.phases if own else ()
    phases = tuple((p.phase, p.mean_ms) for p in measured if p.phase in LIVE_PHASES)
    memory = max((m.peak_bytes for m in own.memory), default=None) if own else None
    return RankLive(
        rank=rank,
        status=status,
        steps=totals.steps if totals else 0,
        step_ms=own.mean_step_ms if own else None,
        phases_ms=phases,
        waiting_ms=waits.wait_ms_per_step if waits and cross.matched_instances else None,
        memory_bytes=memory,
        silent_s=silent_s,
        last_words=_words(status, meta, silent_s),
        stage=stage,
        stage_for_s=stage_for_s,
        on_cpu_pct=on_cpu_share(measured),
    )


def on_cpu_share(phases: Sequence[PhaseStats]) -> float | None:
    """The phases' time on a CPU over their time, in %, of those but the exposed
    communication whose CPU rows cover them; None where none do."""
    covered = [
        p for p in phases if p.on_cpu_pct is not None and p.mean_ms > 0 and p.phase != "comm_wait"
    ]
    wall = sum(p.mean_ms for p in covered)
    if wall <= 0:
        return None
    return sum(p.on_cpu_pct * p.mean_ms for p in covered) / wall  # type: ignore[operator]


def mean_rate(totals: Mapping[int, RankTotals]) -> float | None:
    """Samples per second since the first step: all samples over the longest span."""
    spans = [
        (t.last_end_ns - t.first_start_ns) / 1e9
        for t in totals.values()
        if t.first_start_ns is not None and t.last_end_ns is not None
    ]
    samples = sum(t.samples for t in totals.values())
    span = max(spans, default=0.0)
    return samples / span if span > 0 and samples > 0 else None


FRAME_PARTS = ("steps", "cross_rank")
"""The parts of a window's analysis ``live_snapshot`` reads: what a frame costs to analyse."""


def live_snapshot(
    meta: RunMeta,
    analysis: RunAnalysis | None,
    totals: Mapping[int, RankTotals],
    rank_metas: Mapping[int, RankMeta | None],
    alive: Mapping[int, bool | None],
    silent: Mapping[int, float | None],
    now: float,
    live: Mapping[int, LiveState] | None = None,
    places: Mapping[int, RankPlace] | None = None,
) -> LiveSnapshot:
    """The live figures of ``meta``'s run; ``analysis`` is that of the window's rows;
    ``live`` the ranks' live states (events.live_state.read_live_states); ``places`` their
    stages and coordinates, worked out once by the caller (coordinates.rank_places)."""
    live = live or {}
    figures = RankFigures.of(analysis)
    ranks = tuple(
        rank_live(r, analysis, totals.get(r), rank_metas.get(r), alive.get(r), silent.get(r),
                  live.get(r), meta.start_time or None, now, figures)
        for r in range(meta.world_size)
    )  # fmt: skip
    end = meta.end_time or now
    straggler = analysis.cross_rank.straggler if analysis and analysis.cross_rank else None
    steps = analysis.steps if analysis else None
    return LiveSnapshot(
        run_id=meta.run_id,
        status=meta.status,
        world_size=meta.world_size,
        elapsed_s=end - meta.start_time if meta.start_time else None,
        steps_done=min((r.steps for r in ranks), default=0),
        samples_per_s_now=steps.samples_per_s if steps else None,
        samples_per_s_mean=mean_rate(totals),
        ranks=ranks,
        straggler=straggler.rank if straggler else None,
        straggler_phase=straggler.phase if straggler else None,
        places=places or {},
    )
