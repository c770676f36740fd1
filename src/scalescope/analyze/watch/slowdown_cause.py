"""Who and what made a slowdown (``attribute``): each rank's own time per step (the step less
its pauses and its waiting: the larger of ``comm_wait`` and its time in collectives, since DDP's
wait lies inside its gradients' collectives), before the onset and since. The ranks whose own
time grew by at least half of the job's growth caused it; all ranks of a node among them, and
none elsewhere, make it the node's. None of them: the collectives got slower (communication).
Then a group smaller than the world whose transfer grew apart from the groups of its shape names
a link (analyze/watch/slowdown_link.py, from the live state's time per group); where none does,
the alert is every rank's collectives and names the nodes whose ranks waited the most.
The phase is the one of the cause's phases (or of ``other``: host work outside them) that
grew the most.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from scalescope.analyze.watch.slowdown_link import slow_link
from scalescope.analyze.watch.slowdown_totals import OTHER, PAUSE_PHASES, job_step_ms
from scalescope.events.live_state import TOTAL_PHASES

INPUT_PHASES = ("data", "to_device")
WAIT_PHASE = "comm_wait"
OWN_PHASES = tuple(p for p in TOTAL_PHASES if p not in (*PAUSE_PHASES, WAIT_PHASE)) + (OTHER,)
"""The phases a rank spends on its own work, where a cause can sit."""


@dataclass(frozen=True)
class Attribution:
    subject: str
    ranks: tuple[int, ...]
    nodes: tuple[str, ...]
    phase: str
    category: str
    phase_change_pct: float | None


def _own_ms(ms: dict[str, np.ndarray]) -> np.ndarray:
    """The step less its pauses and its waiting: DDP's ``comm_wait`` lies inside its
    gradients' collectives, so the larger of the two."""
    waiting = np.maximum(ms[WAIT_PHASE], ms["collective_ns"])
    return ms["step_ns"] - sum(ms[p] for p in PAUSE_PHASES) - waiting


def attribute(
    before: tuple[np.ndarray, dict[str, np.ndarray]],
    after: tuple[np.ndarray, dict[str, np.ndarray]],
    hosts: Mapping[int, str],
) -> Attribution:
    """Which ranks (or node, or the communication) and which phase made the job slower
    between the ``before`` and ``after`` windows (``per_step_ms`` of each)."""
    ranks, b, a = _aligned(before, after)
    grew = job_step_ms(a) - job_step_ms(b)
    own = _own_ms(a) - _own_ms(b)
    causes = own >= 0.5 * max(grew, 1e-9)
    if not causes.any():
        waited = (a[WAIT_PHASE] + a["collective_ns"]) - (b[WAIT_PHASE] + b["collective_ns"])
        top = ranks[waited >= 0.5 * waited.max()] if waited.size else ranks
        link = slow_link(ranks, b, a, hosts, grew)
        if link is not None:
            change = round(100 * link.grew_ms / link.before_ms, 1) if link.before_ms > 0 else None
            return Attribution(
                "link", link.ranks, link.hosts, "collectives", "communication", change
            )
        nodes = tuple(sorted({hosts.get(int(r), "") for r in top} - {""}))
        change = _pct(a["collective_ns"], b["collective_ns"], b["step_ns"])
        everyone = tuple(int(r) for r in ranks)
        return Attribution("world", everyone, nodes, "collectives", "communication", change)
    cause_ranks = ranks[causes]
    growth = {p: float(np.sum(a[p][causes] - b[p][causes])) for p in OWN_PHASES}
    phase = max(growth, key=growth.get)
    category = "input" if phase in INPUT_PHASES else "compute"
    nodes = tuple(sorted({hosts.get(int(r), "") for r in cause_ranks} - {""}))
    subject = "rank"
    if causes.all() and len(cause_ranks) > 1:
        subject = "world"
    elif nodes and len(cause_ranks) > 1:
        on_nodes = np.array([hosts.get(int(r), "") in nodes for r in ranks])
        if (on_nodes == causes).all():
            subject = "node"
    change = _pct(a[phase][causes], b[phase][causes], b["step_ns"][causes])
    return Attribution(subject, tuple(int(r) for r in cause_ranks), nodes, phase, category, change)


def window(reads: list[tuple[np.ndarray, dict[str, np.ndarray]]]):
    """The median over reads of each rank's ms per step (``per_step_ms`` of each read), for
    the ranks in every read: one read holding a pause does not move it."""
    ranks = reads[0][0]
    for r, _ in reads[1:]:
        ranks = np.intersect1d(ranks, r)
    stacked: dict[str, list[np.ndarray]] = {}
    for r, ms in reads:
        keep = np.isin(r, ranks)
        for name, values in ms.items():
            stacked.setdefault(name, []).append(values[keep])
    return ranks, {name: np.median(np.stack(v), axis=0) for name, v in stacked.items()}


def _aligned(before, after):
    ranks, i, j = np.intersect1d(before[0], after[0], return_indices=True)
    return ranks, {k: v[i] for k, v in before[1].items()}, {k: v[j] for k, v in after[1].items()}


def _pct(now: np.ndarray, then: np.ndarray, step: np.ndarray) -> float | None:
    """The change of a phase in % of itself; None when it was under 1 % of the step."""
    base = float(np.sum(then))
    if base <= 0.01 * float(np.sum(step)):
        return None
    return round(100 * (float(np.sum(now)) / base - 1), 1)
