"""One analysis of a whole run (run facts, rank outcomes, steps, collectives, clocks, stages,
the what-if, slowdowns), each part computed on first use from the parts it reads and kept:
HTA's ``TraceAnalysis``, built by ``diagnose.recording.Recording`` alone."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from scalescope.analyze.comm.collectives import CollectiveAnalysis, analyze_collectives
from scalescope.analyze.cross_rank import (
    CrossRankAnalysis,
    analyze_cross_rank,
    straggler_min_share_pct,
)
from scalescope.analyze.layouts.p2p import P2PAnalysis, P2PSides, analyze_p2p, pair_p2p
from scalescope.analyze.layouts.pipeline import PipelineAnalysis, analyze_pipeline
from scalescope.analyze.model.replay import ReplayRefused
from scalescope.analyze.model.whatif import WhatIf, hosts_of, replay_grid, what_if_of, with_kept
from scalescope.analyze.nodes import NodeSummary, node_summaries
from scalescope.analyze.part import part
from scalescope.analyze.rank_spread import RankOrder, RankSpreads, rank_order, rank_spreads
from scalescope.analyze.rank_status import FAILED_STATUSES, RankStatus, hostnames, rank_status
from scalescope.analyze.ranks.clocks import ClockAlignment, align_clocks
from scalescope.analyze.ranks.groups import (
    DimTotals,
    ProcessGroup,
    dim_totals,
    dims_of,
    process_groups,
)
from scalescope.analyze.ranks.links import LinkAnalysis, analyze_links
from scalescope.analyze.steps.batch_copies import RankCopies, batch_copies
from scalescope.analyze.steps.pauses import PauseAnalysis, analyze_pauses
from scalescope.analyze.steps.step_slots import StepSlots, measured_slots
from scalescope.analyze.steps.steps import (
    StepAnalysis,
    analyze_steps,
    counted_once,
    first_stage_only,
)
from scalescope.analyze.watch.hang import HangReport, run_hang
from scalescope.analyze.watch.slowdown_alerts import Alert
from scalescope.analyze.watch.slowdown_replay import SlowdownCost, alert_causes, slowdown_costs
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


REPORTED = (
    "run_id", "workload", "command", "world_size", "nproc_per_node", "hostnames", "status",
    "start_time", "end_time", "duration_s", "probe", "warmup_steps", "ranks", "problems",
    "steps", "collectives", "cross_rank", "hang", "pauses", "links", "whatif", "whatif_missing",
    "groups", "dims", "copies", "slowdowns", "p2p", "pipeline",
)  # fmt: skip
"""The parts the report JSON holds, in its order (docs/report-schema.md)."""
UNRECORDED: dict[str, Any] = {
    "cross_rank": None, "hang": None, "pauses": None, "links": None, "whatif": None,
    "whatif_missing": None, "whatif_or_why": None, "groups": (), "dims": (), "copies": (),
    "slowdowns": (), "p2p": None, "pipeline": None,
}  # fmt: skip
"""The parts of an analysis ``given`` without a run: never recorded."""


class RunAnalysis:
    """Everything the report renders, each part computed on first use and kept: reading
    ``steps`` runs neither the what-if nor the findings. None means "never recorded", not
    zero. ``Recording`` (diagnose/recording.py) alone builds it, with the slowdown alerts
    its loader read."""

    def __init__(self, run: Run, alerts: Sequence[Alert] = ()) -> None:
        self.run = run
        self.alerts = tuple(alerts)
        self.builds: Counter[str] = Counter()
        """How many times each part was computed: at most once
        (tests/unit/diagnose/test_one_analysis.py)."""

    @classmethod
    def given(cls, run: Run | None = None, **parts: Any) -> RunAnalysis:
        """An analysis whose parts are given, not computed (the rules' unit tests)."""
        analysis = cls.__new__(cls)
        analysis.run, analysis.alerts, analysis.builds = run, (), Counter()
        if run is None:
            analysis.__dict__.update(UNRECORDED)
        analysis.__dict__.update(parts)
        return analysis

    @property
    def meta(self) -> RunMeta:
        return self.run.meta

    @part
    def run_id(self) -> str:
        return self.meta.run_id

    @part
    def workload(self) -> str:
        return self.meta.workload

    @part
    def command(self) -> tuple[str, ...]:
        return tuple(self.meta.command)

    @part
    def world_size(self) -> int:
        return self.meta.world_size

    @part
    def nproc_per_node(self) -> int:
        return self.meta.nproc_per_node

    @part
    def status(self) -> str:
        return self.meta.status

    @part
    def start_time(self) -> float | None:
        """Unix seconds."""
        return self.meta.start_time or None

    @part
    def end_time(self) -> float | None:
        return self.meta.end_time

    @part
    def duration_s(self) -> float | None:
        start, end = self.start_time, self.end_time
        return end - start if start is not None and end is not None and end >= start else None

    @part
    def probe(self) -> bool:
        """False when the run was launched without the probe: no events exist by design."""
        return self.meta.probe

    @part
    def warmup_steps(self) -> int:
        return self.meta.warmup_steps

    @part
    def ranks(self) -> tuple[RankStatus, ...]:
        return tuple(rank_status(self.run, r) for r in range(self.meta.world_size))

    @part
    def hostnames(self) -> tuple[str, ...]:
        return hostnames(self.run, self.ranks)

    @part
    def problems(self) -> tuple[str, ...]:
        """Missing or truncated rank files, as the loader found them."""
        return tuple(self.run.problems)

    @part
    def pauses(self) -> PauseAnalysis | None:
        """Steps of 10 typical steps or more on every rank that completed, spent evaluating
        or saving a checkpoint (analyze/steps/pauses.py); one rank's stall is not one."""
        return analyze_pauses(self.run.events, self.warmup_steps)

    @part
    def measured(self) -> Run:
        """The run without its pauses' rows (``without_pauses``)."""
        return without_pauses(self.run, self.pauses)

    @part
    def slots(self) -> StepSlots:
        """The measured steps' slots, for the steps and the cross-rank analysis."""
        return measured_slots(self.measured.events, self.warmup_steps)

    @part
    def clocks(self) -> tuple[ClockAlignment, ...]:
        """Every rank on rank 0's clock: aligned here, once, for every part and view."""
        return align_clocks(self.run)

    @part
    def groups(self) -> tuple[ProcessGroup, ...]:
        """The process groups with their mesh dimension or role (analyze/groups.py)."""
        return process_groups(self.run)

    @part
    def dims(self) -> tuple[DimTotals, ...]:
        """The measured collectives per dimension."""
        return dim_totals(self.measured, self.groups, self.warmup_steps)

    @part
    def sides(self) -> P2PSides | None:
        """Each send paired with its recv across ranks."""
        return pair_p2p(self.measured.events, self.clocks)

    @part
    def cross_rank(self) -> CrossRankAnalysis | None:
        """Waiting versus transfer, stragglers, overlap; None with fewer than 2 ranks."""
        return analyze_cross_rank(
            self.measured, self.warmup_steps, self.slots, self.sides, dims_of(self.groups),
            clocks=self.clocks, pipeline=self.pipeline,
        )  # fmt: skip

    @part
    def p2p(self) -> P2PAnalysis | None:
        """Sends paired with their recvs: per rank and step, per peer (analyze/p2p.py); None
        without sends or recvs that name their peer."""
        sides = self.sides
        return analyze_p2p(self.measured.events, sides, self.slots) if sides is not None else None

    @part
    def pipeline(self) -> PipelineAnalysis | None:
        """Pipeline stages: compute per microbatch, bubble, the bound stage, a block move
        (analyze/pipeline.py); None without a pipeline."""
        stages = {r: m.pipeline for r, m in self.run.ranks.items() if m.pipeline is not None}
        return analyze_pipeline(self.measured.events, stages, self.warmup_steps, self.p2p)

    @part
    def steps(self) -> StepAnalysis | None:
        steps = analyze_steps(self.measured.events, self.warmup_steps, self.slots)
        return _pipeline_once(_counted_once(steps, self.groups), self.pipeline)

    @part
    def collectives(self) -> CollectiveAnalysis | None:
        return analyze_collectives(
            self.measured.events, self.world_size, self.warmup_steps, dims_of(self.groups)
        )

    @part
    def hang(self) -> HangReport | None:
        """The launcher's record of a hang (hang.json), or one seen in the events: a rank
        ended while it had waited in a collective for 10 typical steps; None when the run
        did not hang."""
        return run_hang(self.run) if self.probe else None

    @part
    def links(self) -> LinkAnalysis | None:
        """Groups smaller than the world compared by transfer time (analyze/links.py); None
        when every collective spans the world (nothing to compare a link with)."""
        return analyze_links(self.measured, self.warmup_steps, self.clocks)

    @part
    def copies(self) -> tuple[RankCopies, ...]:
        """The batches' copies to the device per rank (analyze/batch_copies.py)."""
        return batch_copies(self.measured.events, self.warmup_steps)

    @part
    def whatif_or_why(self) -> WhatIf | str | None:
        """The what-if, or why no step could be replayed (one line); None without the probe."""
        if not self.probe:
            return None
        return _what_if(self.measured, self.meta, alert_causes(self.alerts), self.clocks)

    @part
    def whatif(self) -> WhatIf | None:
        """The measured steps replayed, and what fixing each candidate cause buys
        (analyze/whatif.py); None when no step can be replayed (``whatif_missing``: why)."""
        found = self.whatif_or_why
        return found if isinstance(found, WhatIf) else None

    @part
    def whatif_missing(self) -> str | None:
        """Why the run has no what-if, in one line; None when it has one or had no probe."""
        found = None if self.whatif is not None else self.whatif_or_why
        return found if isinstance(found, str) else None

    @part
    def slowdowns(self) -> tuple[SlowdownCost, ...]:
        """The slowdowns the launcher's watch named while the run trained (``alerts.jsonl``),
        each with its cost, its pauses left out (analyze/slowdown_replay.py)."""
        if not self.alerts:
            return ()
        paused = [p.step for p in self.pauses.pauses] if self.pauses else []
        return slowdown_costs(self.run, list(self.alerts), self.whatif, paused)

    def replaced(self, **parts: Any) -> RunAnalysis:
        """A copy with ``parts`` given instead (``dataclasses.replace`` for a lazy object)."""
        kept = {k: v for k, v in self.__dict__.items() if k not in ("run", "alerts", "builds")}
        copy = RunAnalysis.given(self.run, **kept)
        copy.alerts = self.alerts
        copy.__dict__.update(parts)
        return copy

    def compute(self, *names: str) -> None:
        """The parts ``names`` computed now (for a caller that times the analysis)."""
        for name in names:
            getattr(self, name)

    def reported(self) -> dict[str, Any]:
        """The parts the report JSON holds (``REPORTED``), each computed if not yet."""
        return {name: getattr(self, name) for name in REPORTED}

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

    @part
    def slowest_first(self) -> RankOrder | None:
        """The ranks from the slowest to the fastest (analyze/rank_spread.py)."""
        return rank_order(self.steps, self.cross_rank)

    @part
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

    @part
    def nodes(self) -> tuple[NodeSummary, ...]:
        """The ranks by host, the busiest node first (analyze/nodes.py)."""
        hosts = ((r.rank, r.hostname) for r in self.ranks)
        return node_summaries(hosts, self.steps, self.cross_rank)


def _what_if(
    run: Run, meta: RunMeta, extra: tuple[str, ...], clocks: tuple[ClockAlignment, ...]
) -> WhatIf | str:
    """The report's what-if, with ``extra`` causes tried (the slowdowns' subjects; one the
    model refuses is a line of ``WhatIf.refused``); where the model holds no step, or its
    collectives cannot be replayed in any order (``ReplayRefused``), why: the report says so
    and goes on without it."""
    last = replayed_steps(meta.world_size)
    grid, left = replay_grid(run, meta.warmup_steps, last=last, clocks=clocks)
    if grid is None:
        return "; ".join(left)
    try:
        found = what_if_of(grid, left, hosts_of(run), meta.warmup_steps, extra=extra)
        return with_kept(found, run)
    except ReplayRefused as exc:
        return str(exc)


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
