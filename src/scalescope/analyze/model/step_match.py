"""Which steps the step model (step_grid.py) holds. The grid takes one step's collectives,
rank by rank (their groups, ops and sizes, the instances they form), for every step, so a step
is kept only when each rank issued, in the same order, the same collectives (group or
point-to-point channel, op, message size) as in the most common such step. A step of the same
count in another order would be replayed against another step's instances; it is left out and
counted in one line."""

from __future__ import annotations

import hashlib

import numpy as np

from scalescope.analyze.ranks.matching import p2p_channels
from scalescope.events import EventTable

DIFFER = "step(s) whose collectives differ between ranks or never completed"


def regular_steps(
    colls: EventTable, ranks: np.ndarray, steps: np.ndarray
) -> tuple[np.ndarray, list[str]]:
    """The steps of ``steps`` whose collectives (``colls``: every rank's, with a sequence
    number) match, rank by rank and in issue order, those of the most common step (the
    earliest of equally common ones), and what was left out: steps where the ranks issued
    different numbers or a collective never completed, then steps of the same number whose
    groups, ops or sizes differ."""
    at_step = np.searchsorted(steps, colls.step)
    counts = np.zeros((len(steps), len(ranks)), dtype=np.int64)
    np.add.at(counts, (at_step, np.searchsorted(ranks, colls.rank)), 1)
    incomplete = np.zeros(len(steps), dtype=bool)
    incomplete[np.unique(at_step[colls.dur_ns < 0])] = True
    uniform = (counts == counts[:, :1]).all(axis=1) & (counts[:, 0] > 0) & ~incomplete
    kind = _sequences(colls, at_step, len(steps), uniform)
    ok = kind == np.argmax(np.bincount(kind[uniform])) if uniform.any() else uniform
    same_count = uniform & (counts[:, 0] == (counts[ok, 0][0] if ok.any() else -1))
    left = [f"{int((~same_count).sum())} {DIFFER}"] if (~same_count).any() else []
    if (same_count & ~ok).any():
        left.append(
            f"{int((same_count & ~ok).sum())} step(s) whose collectives come in another order "
            f"or differ in group, op or size from the {int(ok.sum())} modelled steps'"
        )
    return steps[ok], left


def _sequences(colls: EventTable, at_step: np.ndarray, n_steps: int, which: np.ndarray):
    """Per step of ``which``: an id of its collectives' (channel, op, size) sequence, rank
    after rank in issue order, ids in the order the sequences first occur; -1 elsewhere."""
    order = by_step_rank_issue(colls.step, colls.rank, colls.start_ns)
    channel = p2p_channels(colls)[0]
    rows = np.stack([channel, colls.name, colls.nbytes], axis=1).astype(np.int64)[order]
    bounds = np.searchsorted(at_step[order], np.arange(n_steps + 1))
    kind = np.full(n_steps, -1, dtype=np.int64)
    seen: dict[bytes, int] = {}
    for s in np.flatnonzero(which).tolist():
        digest = hashlib.blake2b(rows[bounds[s] : bounds[s + 1]], digest_size=16).digest()
        kind[s] = seen.setdefault(digest, len(seen))
    return kind


def by_step_rank_issue(step: np.ndarray, rank: np.ndarray, issue: np.ndarray) -> np.ndarray:
    """The order of rows by (step, rank, issue). The table holds each rank's rows in the
    order it recorded them, so a stable sort by (step, rank) merges a few long runs; a full
    sort only where some rank recorded a collective before an earlier-issued one."""
    key = step.astype(np.int64) * (int(rank.max()) + 1 if len(rank) else 1) + rank
    order = np.argsort(key, kind="stable")
    sorted_key, sorted_issue = key[order], issue[order]
    same = sorted_key[1:] == sorted_key[:-1]
    if np.all(sorted_issue[1:][same] >= sorted_issue[:-1][same]):
        return order
    return np.lexsort((issue, key))
