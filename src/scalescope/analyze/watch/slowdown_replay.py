"""The slowdowns of a recorded run: what the watch's alerts cost (``slowdown_costs``), and
the slowdown detector replayed over the run, offline: the reads a watcher polling
every ``poll_s`` would have made of the ranks' running totals, rebuilt from the event table
(each rank's steps, phases and collectives summed up to each step's end, on rank 0's clock).

For a run recorded without the watch, or with another threshold, and to test the detector
on real streams: its alerts name the same steps and ranks the live watch's would, to within
a read.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass

import numpy as np

from scalescope.analyze.model.whatif import WhatIf
from scalescope.analyze.ranks.clocks import align_clocks, aligned_start_ns
from scalescope.analyze.ranks.summary_waits import summarised
from scalescope.analyze.watch.slowdown import DetectorConfig, SlowdownDetector
from scalescope.analyze.watch.slowdown_alerts import Alert
from scalescope.analyze.watch.slowdown_totals import FIELDS, TotalsRead
from scalescope.events import Kind, Run
from scalescope.events.live_state import GROUP_SLOTS, TOTAL_PHASES, evenly_spaced

POLL_S = 0.5
"""The hang watch's poll (launch/watch/hang.py POLL_S)."""
_COL = {name: i for i, name in enumerate(FIELDS)}


GroupTotals = dict[tuple[int, int, int], np.ndarray]


def step_totals(run: Run) -> tuple[np.ndarray, list[np.ndarray], list[np.ndarray], list]:
    """Per rank (ranks in order): each step's end (ns, aligned), the running totals after
    it (steps x FIELDS) and those of its time in each group the live state has a slot for
    (``GroupTotals``)."""
    events = run.events
    clocks = align_clocks(run)
    ranks = np.array(events.ranks(), dtype=np.int64)
    steps = events.of_kind(Kind.STEP)
    ends_all = aligned_start_ns(steps, clocks) + steps.dur_ns
    phases = events.of_kind(Kind.PHASE)
    colls = (events.of_kind(Kind.COLLECTIVE), summarised(events, p2p=True))
    names = {p: phases.symbols.id_of(p) if p in phases.symbols else -1 for p in TOTAL_PHASES}
    ends, totals, groups = [], [], []
    for rank in ranks.tolist():
        mine = steps.rank == rank
        order = np.argsort(steps.step[mine], kind="stable")
        numbers = steps.step[mine][order]
        values = np.zeros((len(numbers), len(FIELDS)))
        values[:, _COL["steps"]] = 1
        values[:, _COL["step_ns"]] = steps.dur_ns[mine][order]
        values[:, _COL["samples"]] = steps.count[mine][order]
        values[:, _COL["collective_ns"]] = sum(_per_step(c, rank, numbers) for c in colls)
        for phase, sid in names.items():
            rows = phases.select((phases.rank == rank) & (phases.name == sid))
            values[:, _COL[phase]] = _per_step(rows, rank, numbers)
        ends.append(ends_all[mine][order])
        totals.append(np.cumsum(values, axis=0))
        groups.append(_group_totals(run, colls, rank, numbers))
    return ranks, ends, totals, groups


def _group_totals(run: Run, colls: tuple, rank: int, numbers: np.ndarray) -> GroupTotals:
    """The running time per step in each group a live state would have a slot for (the
    calls' rows, and the SUMMARY rows of the steps recorded as summaries)."""
    meta = run.ranks.get(rank)
    out: GroupTotals = {}
    if meta is None or not meta.groups:
        return out
    mine = [c.select(c.rank == rank) for c in colls]
    for label, group in meta.groups.items():
        key = evenly_spaced(group.ranks)
        known = [c for c in mine if label in c.symbols]
        if key is None or key[2] >= run.meta.world_size or not known:
            continue
        if len(out) < GROUP_SLOTS:
            per_step = [_per_step(c.select(c.group == c.symbols.id_of(label)), rank, numbers)
                        for c in known]  # fmt: skip
            out[key] = np.cumsum(sum(per_step))
    return out


def _per_step(rows, rank: int, numbers: np.ndarray) -> np.ndarray:
    """The durations of ``rows`` of ``rank`` summed per step of ``numbers`` (incomplete rows,
    dur -1, left out)."""
    mine = (rows.rank == rank) & (rows.dur_ns >= 0)
    if not mine.any() or not len(numbers):
        return np.zeros(len(numbers))
    at = np.searchsorted(numbers, rows.step[mine])
    inside = (at < len(numbers)) & (numbers[np.minimum(at, len(numbers) - 1)] == rows.step[mine])
    out = np.zeros(len(numbers))
    np.add.at(out, at[inside], rows.dur_ns[mine][inside])
    return out


def recorded_reads(run: Run, poll_s: float = POLL_S) -> Iterator[TotalsRead]:
    """The reads a watcher polling every ``poll_s`` would have made (``at_s`` from the first
    step's end, on rank 0's clock)."""
    ranks, ends, totals, groups = step_totals(run)
    if not ranks.size or not any(len(e) for e in ends):
        return
    first = min(int(e[0]) for e in ends if len(e))
    last = max(int(e[-1]) for e in ends if len(e))
    keys = {key for mine in groups for key in mine}
    for at in np.arange(first, last + poll_s * 1e9, poll_s * 1e9):
        values = np.zeros((len(ranks), len(FIELDS)))
        per_group = {key: np.full(len(ranks), np.nan) for key in keys}
        for i, (end, cum) in enumerate(zip(ends, totals, strict=True)):
            n = int(np.searchsorted(end, at, side="right"))
            if n:
                values[i] = cum[n - 1]
            for key, running in groups[i].items():
                per_group[key][i] = running[n - 1] if n else 0.0
        yield TotalsRead((at - first) / 1e9, ranks, values, per_group)


def replay_run(
    run: Run, config: DetectorConfig | None = None, poll_s: float = POLL_S
) -> list[Alert]:
    """The alerts the watch would have raised over the run (``detected_at``: seconds after
    the first step's end)."""
    hosts = {r: m.hostname for r, m in run.ranks.items() if m.hostname}
    detector = SlowdownDetector(config, hosts)
    return [a for read in recorded_reads(run, poll_s) for a in detector.observe_read(read)]


@dataclass(frozen=True)
class SlowdownCost:
    """A slowdown the watch named while the run trained, and what it cost."""

    onset: Alert
    recovery_step: int | None
    """None: it lasted to the end of the run."""
    steps: int
    """Steps from its onset to its recovery (or the last step), its pauses left out."""
    lost_s: float
    """The steps' time beyond the baseline step: the mean over ranks of each step, less the
    onset's baseline, summed (s); pauses (evaluations, checkpoints) are not lost time."""
    lost_pct: float
    """Of the run's time in steps (%)."""
    fix_cause: str
    """The what-if's cause for its subject (``rank:N``, ``node:HOST``, ``link:HOST,HOST``;
    "" for the collectives)."""
    fix_gain_ms: float | None
    """What the report's what-if says fixing it buys per step (None: not replayed)."""
    paused_steps: tuple[int, ...] = ()
    """The run's pauses (``analyze.steps.pauses``) inside it, left out of its lost time."""

    @property
    def pause_words(self) -> str:
        """What its lost time leaves out; empty when it held no pause."""
        if not self.paused_steps:
            return ""
        shown = ", ".join(f"{s:,}" for s in self.paused_steps[:8])
        more = ", ..." if len(self.paused_steps) > 8 else ""
        n = len(self.paused_steps)
        return (
            f"its lost time leaves out {n} pause step{'s' if n != 1 else ''} ({shown}{more}): "
            "evaluations and checkpoints are information, not lost time"
        )


def slowdown_costs(
    run: Run, alerts: list[Alert], whatif: WhatIf | None, pause_steps: Collection[int] = ()
) -> tuple[SlowdownCost, ...]:
    """Each onset in ``alerts`` (read_alerts) with its cost from the run's steps, the
    ``pause_steps`` (the run's evaluations and checkpoints) left out of it."""
    steps = run.events.of_kind(Kind.STEP)
    if not len(steps):
        return ()
    numbers, at = np.unique(steps.step, return_inverse=True)
    mean_ms = np.bincount(at, steps.dur_ns) / np.bincount(at) / 1e6
    total_s = float(mean_ms.sum()) / 1e3
    recovered = {a.id: a.detected_step for a in alerts if a.event == "recovery"}
    fixes = {f.cause: f.gain_ms for f in whatif.fixes} if whatif is not None else {}
    paused = np.isin(numbers, np.fromiter(pause_steps, dtype=np.int64))
    out = []
    for a in (a for a in alerts if a.event == "onset"):
        end = recovered.get(a.id)
        window = (numbers >= a.since_step) & (numbers < (end if end is not None else np.inf))
        inside = window & ~paused
        lost = max(float(np.sum(mean_ms[inside] - a.baseline_ms)), 0.0) / 1e3
        cause = _cause(a)
        out.append(SlowdownCost(
            onset=a, recovery_step=end, steps=int(inside.sum()), lost_s=round(lost, 3),
            lost_pct=round(100 * lost / total_s, 1) if total_s > 0 else 0.0,
            fix_cause=cause, fix_gain_ms=fixes.get(cause) if cause else None,
            paused_steps=tuple(numbers[window & paused].tolist()),
        ))  # fmt: skip
    return tuple(out)


def alert_causes(alerts: list[Alert]) -> tuple[str, ...]:
    """The what-if causes of the onsets' subjects, for the report's what-if to try."""
    return tuple(c for a in alerts if a.event == "onset" and (c := _cause(a)))


def _cause(a: Alert) -> str:
    if a.subject == "rank" and len(a.ranks) == 1:
        return f"rank:{a.ranks[0]}"
    if a.subject == "node" and len(a.nodes) == 1:
        return f"node:{a.nodes[0]}"
    if a.subject == "link" and a.nodes:
        return f"link:{','.join(a.nodes)}"
    return ""
