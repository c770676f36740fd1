"""One analysis of a whole run: run facts, rank outcomes, steps, collectives, problems."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from scalescope.analyze.batch_copies import RankCopies, batch_copies
from scalescope.analyze.clocks import align_clocks
from scalescope.analyze.collectives import CollectiveAnalysis, analyze_collectives
from scalescope.analyze.cross_rank import (
    CrossRankAnalysis,
    analyze_cross_rank,
    straggler_min_share_pct,
)
from scalescope.analyze.groups import (
    DimTotals,
    ProcessGroup,
    dim_totals,
    dims_of,
    process_groups,
)
from scalescope.analyze.hang import HangReport, run_hang
from scalescope.analyze.links import LinkAnalysis, analyze_links
from scalescope.analyze.nodes import NodeSummary, node_summaries
from scalescope.analyze.p2p import P2PAnalysis, analyze_p2p, pair_p2p
from scalescope.analyze.pauses import PauseAnalysis, analyze_pauses
from scalescope.analyze.pipeline import PipelineAnalysis, analyze_pipeline
from scalescope.analyze.rank_spread import RankOrder, RankSpreads, rank_order, rank_spreads
from scalescope.analyze.slowdown import read_alerts
from scalescope.analyze.slowdown_replay import SlowdownCost, alert_causes, slowdown_costs
from scalescope.analyze.step_slots import measured_slots
from scalescope.analyze.steps import (
    StepAnalysis,
    analyze_steps,
    counted_once,
    first_stage_only,
)
from scalescope.analyze.whatif import WhatIf, what_if
from scalescope.events import Run, RunMeta

REPLAYED_STEPS = 256
"""The report's what-if replays a run's last steps, at most this many: at 1,024 ranks x
1,000 steps the whole run would cost ~6 s of the report's 10 (``scalescope whatif`` replays
them all)..."""
REPLAYED_RANK_STEPS = 131_072
"""...and at most this many rank-steps, down to ``MIN_REPLAYED_STEPS``: 128 steps at 1,024
ranks (2.3 s -> 1.2 s there), every step up to 256 at 512 ranks and fewer."""
MIN_REPLAYED_STEPS = 64


def replayed_steps(world_size: int) -> int:
    """The last steps the report's what-if replays for a run of ``world_size`` ranks."""
    bound = REPLAYED_RANK_STEPS // max(world_size, 1)
    return max(MIN_REPLAYED_STEPS, min(REPLAYED_STEPS, bound))


FAILED_STATUSES = ("failed", "killed", "interrupted")
PEER_FAILURE_MARKERS = ("Connection closed by peer", "Connection reset by peer", "remote worker")
"""Errors gloo/NCCL raise in the ranks that survive another rank's death."""


@dataclass(frozen=True)
class RankStatus:
    """How one rank ended; status ``unknown`` when neither it nor the launcher said."""

    rank: int
    hostname: str
    status: str
    exit_code: int | None
    error: str | None
    """Last lines of its traceback or the signal that ended it."""
    steps: int | None
    """Steps the rank reported finishing; None when unknown."""
    end_time: float | None = None
    """Unix seconds when the rank ended (or the launcher saw it fail)."""

    @property
    def failed_because_of_peer(self) -> bool:
        """The error only says another rank went away: a consequence, not a cause."""
        return any(marker in (self.error or "") for marker in PEER_FAILURE_MARKERS)


@dataclass(frozen=True)
class RunAnalysis:
    """Everything the report renders. None means "never recorded", not zero."""

    run_id: str
    workload: str
    command: tuple[str, ...]
    world_size: int
    nproc_per_node: int
    hostnames: tuple[str, ...]
    status: str
    start_time: float | None
    """Unix seconds."""
    end_time: float | None
    duration_s: float | None
    probe: bool
    """False when the run was launched without the probe: no events exist by design."""
    warmup_steps: int
    ranks: tuple[RankStatus, ...]
    problems: tuple[str, ...]
    """Missing or truncated rank files, as the loader found them."""
    steps: StepAnalysis | None
    collectives: CollectiveAnalysis | None
    cross_rank: CrossRankAnalysis | None = None
    """Clocks, waiting versus transfer, stragglers, overlap; None with fewer than 2 ranks."""
    hang: HangReport | None = None
    """The launcher's record of a hang (hang.json), or one seen in the events: a rank ended
    while it had waited in a collective for 10 typical steps; None when the run did not hang."""
    pauses: PauseAnalysis | None = None
    """Steps of 10 typical steps or more on every rank that completed (checkpoints)."""
    links: LinkAnalysis | None = None
    """Groups smaller than the world compared by transfer time (analyze/links.py); None
    when every collective spans the world (nothing to compare a link with)."""
    whatif: WhatIf | None = None
    """The measured steps replayed, and what fixing each candidate cause buys
    (analyze/whatif.py); None when no step can be replayed."""
    groups: tuple[ProcessGroup, ...] = ()
    """The process groups with their mesh dimension or role (analyze/groups.py)."""
    dims: tuple[DimTotals, ...] = ()
    """The measured collectives per dimension."""
    copies: tuple[RankCopies, ...] = ()
    """The batches' copies to the device per rank (analyze/batch_copies.py)."""
    slowdowns: tuple[SlowdownCost, ...] = ()
    """The slowdowns the launcher's watch named while the run trained (``alerts.jsonl``),
    each with its cost (analyze/slowdown_replay.py)."""
    p2p: P2PAnalysis | None = None
    """Sends paired with their recvs: per rank and step, per peer (analyze/p2p.py); None
    without sends or recvs that name their peer."""
    pipeline: PipelineAnalysis | None = None
    """Pipeline stages: compute per microbatch, bubble, the bound stage, a block move
    (analyze/pipeline.py); None without a pipeline."""

    @property
    def failed_ranks(self) -> tuple[RankStatus, ...]:
        return tuple(r for r in self.ranks if r.status in FAILED_STATUSES)

    @property
    def first_failure(self) -> RankStatus | None:
        """The rank that most likely failed first: not a peer-loss error, then earliest."""
        failed = sorted(
            self.failed_ranks,
            key=lambda r: (
                r.status == "interrupted",
                r.failed_because_of_peer,
                r.end_time is None,
                r.end_time or 0.0,
            ),
        )
        return failed[0] if failed else None

    @cached_property
    def slowest_first(self) -> RankOrder | None:
        """The ranks from the slowest to the fastest (analyze/rank_spread.py)."""
        return rank_order(self.steps, self.cross_rank)

    @cached_property
    def spreads(self) -> RankSpreads:
        """Each per-rank figure over every rank, for a report of many ranks."""
        return rank_spreads(self.steps, self.cross_rank)

    @property
    def straggler_need_pct(self) -> float | None:
        """The share of the waiting a rank needed to be named the straggler in this run."""
        if self.cross_rank is None:
            return None
        shares = sorted((r.lateness_share_pct for r in self.cross_rank.ranks), reverse=True)
        return straggler_min_share_pct(len(shares), shares[1] if len(shares) > 1 else None)

    @cached_property
    def nodes(self) -> tuple[NodeSummary, ...]:
        """The ranks by host, the busiest node first (analyze/nodes.py)."""
        hosts = ((r.rank, r.hostname) for r in self.ranks)
        return node_summaries(hosts, self.steps, self.cross_rank)


def _rank_status(run: Run, rank: int) -> RankStatus:
    """The most final word on a rank: a finished status beats ``running``.

    A rank killed hard cannot update its own file (``ranks/rank-N.json``), so the
    launcher's entry in run.json may know more; either may be missing. Exit code and
    error are taken from whichever source has them.
    """
    candidates = [m for m in (run.ranks.get(rank), run.meta.ranks.get(str(rank))) if m]
    if not candidates:
        return RankStatus(rank, "", "unknown", None, None, None)
    final = [m for m in candidates if m.status != "running"]
    best = (final or candidates)[0]
    ordered = [best, *candidates]
    return RankStatus(
        rank=rank,
        hostname=next((m.hostname for m in ordered if m.hostname), ""),
        status=best.status,
        exit_code=next((m.exit_code for m in ordered if m.exit_code is not None), None),
        error=next((m.error for m in ordered if m.error), None),
        steps=best.steps,
        end_time=next((m.end_time for m in ordered if m.end_time), None),
    )


def _hostnames(run: Run, ranks: tuple[RankStatus, ...]) -> tuple[str, ...]:
    if run.meta.hostnames:
        return tuple(run.meta.hostnames)
    return tuple(sorted({r.hostname for r in ranks if r.hostname}))


def analyze_run(run: Run) -> RunAnalysis:
    """Analyse a loaded run; stages without data are None (a probe-off run has no events)."""
    meta = run.meta
    ranks = tuple(_rank_status(run, r) for r in range(meta.world_size))
    pauses = analyze_pauses(run.events, meta.warmup_steps)
    measured = without_pauses(run, pauses)
    slots = measured_slots(measured.events, meta.warmup_steps)  # for steps and cross-rank
    groups = process_groups(run)
    start = meta.start_time or None
    end = meta.end_time
    duration = end - start if start is not None and end is not None and end >= start else None
    sides = pair_p2p(measured.events, align_clocks(measured))
    cross_rank = analyze_cross_rank(measured, meta.warmup_steps, slots, sides, dims_of(groups))
    p2p = analyze_p2p(measured.events, sides, slots) if sides is not None else None
    stages = {r: m.pipeline for r, m in run.ranks.items() if m.pipeline is not None}
    pipeline = analyze_pipeline(measured.events, stages, meta.warmup_steps, p2p)
    steps = _counted_once(analyze_steps(measured.events, meta.warmup_steps, slots), groups)
    alerts = read_alerts(run.path)
    whatif = _what_if(measured, meta, alert_causes(alerts)) if meta.probe else None
    return RunAnalysis(
        run_id=meta.run_id,
        workload=meta.workload,
        command=tuple(meta.command),
        world_size=meta.world_size,
        nproc_per_node=meta.nproc_per_node,
        hostnames=_hostnames(run, ranks),
        status=meta.status,
        start_time=start,
        end_time=end,
        duration_s=duration,
        probe=meta.probe,
        warmup_steps=meta.warmup_steps,
        ranks=ranks,
        problems=tuple(run.problems),
        steps=_pipeline_once(steps, pipeline),
        collectives=analyze_collectives(
            measured.events, meta.world_size, meta.warmup_steps, dims_of(groups)
        ),
        cross_rank=cross_rank,
        p2p=p2p,
        pipeline=pipeline,
        hang=run_hang(run) if meta.probe else None,
        pauses=pauses,
        links=analyze_links(measured, meta.warmup_steps),
        groups=groups,
        dims=dim_totals(measured, groups, meta.warmup_steps),
        whatif=whatif,
        copies=batch_copies(measured.events, meta.warmup_steps),
        slowdowns=slowdown_costs(run, alerts, whatif),
    )


def _what_if(run: Run, meta: RunMeta, extra: tuple[str, ...]) -> WhatIf | None:
    """The report's what-if, with ``extra`` causes tried (the slowdowns' subjects); None
    where its collectives cannot be replayed in any order (``replay``'s refusal): the report
    goes on without it."""
    try:
        last = replayed_steps(meta.world_size)
        return what_if(run, meta.warmup_steps, last=last, extra=extra)
    except ValueError:
        return None


def _counted_once(
    steps: StepAnalysis | None, groups: tuple[ProcessGroup, ...]
) -> StepAnalysis | None:
    named = {g.dim: len(g.ranks) for g in groups if g.named}
    return counted_once(steps, named) if steps is not None else None


def _pipeline_once(
    steps: StepAnalysis | None, pipeline: PipelineAnalysis | None
) -> StepAnalysis | None:
    if steps is None or pipeline is None:
        return steps
    return first_stage_only(steps, {f.rank for f in pipeline.ranks if f.stage == 0})


def without_pauses(run: Run, pauses: PauseAnalysis | None) -> Run:
    """``run`` without the rows of its pause steps: like warm-up, a checkpoint's step is left
    out of the step statistics (the pause finding describes it)."""
    if pauses is None:
        return run
    steps = np.array([p.step for p in pauses.pauses])
    return replace(run, events=run.events.select(~np.isin(run.events.step, steps)))
