"""The ranks' running totals as a watcher reads them (events/live_state.py ``LiveTotals``),
and each field per step between two reads: what the slowdown detector (slowdown.py) follows
and its attribution (slowdown_cause.py) compares."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from scalescope.analyze.watch.slowdown_link import group_field
from scalescope.events.live_state import TOTAL_PHASES, LiveState

PAUSE_PHASES = ("eval", "checkpoint")
"""Phases that stop training on purpose: not part of the step the detector follows."""
OTHER = "other"
FIELDS = ("steps", "step_ns", "samples", "collective_ns", *TOTAL_PHASES)
_COL = {name: i for i, name in enumerate(FIELDS)}


@dataclass
class TotalsRead:
    """The ranks' running totals as one read found them."""

    at_s: float
    ranks: np.ndarray
    values: np.ndarray
    """Ranks x FIELDS."""
    groups: dict[tuple[int, int, int], np.ndarray] = field(default_factory=dict)
    """Each group's (first, stride, size of its members) time in its collectives per rank,
    aligned with ``ranks`` (ns; NaN: not a member, or no slot for it)."""


def read_totals(at_s: float, states: Mapping[int, LiveState]) -> TotalsRead:
    rows = []
    ranks = []
    groups: dict[tuple[int, int, int], dict[int, int]] = {}
    for rank, s in sorted(states.items()):
        t = s.totals
        if t is None:
            continue
        ranks.append(rank)
        rows.append(
            [s.steps_done, t.step_ns, t.samples, t.collective_ns]
            + [t.phase_ns[p] for p in TOTAL_PHASES]
        )
        for key, ns in t.group_ns.items():
            groups.setdefault(key, {})[len(ranks) - 1] = ns
    values = np.array(rows, dtype=np.float64).reshape(len(rows), len(FIELDS))
    per_group = {}
    for key, at in groups.items():
        column = per_group[key] = np.full(len(ranks), np.nan)
        column[list(at)] = list(at.values())
    return TotalsRead(at_s, np.array(ranks, dtype=np.int64), values, per_group)


def per_step_ms(start: TotalsRead, end: TotalsRead) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The ranks present in both and each field per step between them: times in ms (under
    their FIELDS names), samples as a count; ranks that did no step left out."""
    common, a, b = np.intersect1d(start.ranks, end.ranks, return_indices=True)
    delta = end.values[b] - start.values[a]
    steps = delta[:, _COL["steps"]]
    keep = steps > 0
    delta, steps = delta[keep], steps[keep]
    out = {name: delta[:, i] / steps / 1e6 for i, name in enumerate(FIELDS) if name != "steps"}
    out["samples"] = delta[:, _COL["samples"]] / steps  # a count, not a time
    phases = sum(out[p] for p in TOTAL_PHASES)
    out[OTHER] = np.maximum(out["step_ns"] - phases, 0.0)
    out["steps"] = steps
    for key in start.groups.keys() & end.groups.keys():
        grown = end.groups[key][b] - start.groups[key][a]
        out[group_field(key)] = grown[keep] / steps / 1e6
    return common[keep], out


def job_step_ms(ms: dict[str, np.ndarray]) -> float:
    """The mean over ranks of the step less the pauses."""
    step = ms["step_ns"] - sum(ms[p] for p in PAUSE_PHASES)
    return float(np.mean(step))


def min_steps(snap: TotalsRead) -> int:
    """The fewest steps a rank had done at the read (0 without ranks)."""
    return int(np.min(snap.values[:, _COL["steps"]])) if snap.values.size else 0
