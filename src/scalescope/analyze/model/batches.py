"""Sends and receives issued as one batch and waited for together (the step model's
``StepGrid.waits_with``).

``batch_isend_irecv`` (and a pipeline's exchange of activations, torch's pipelining
schedules, DeepSpeed's pipe) issues its sends and receives one after another and then waits
for every work it returned before the compute goes on. Read op by op, only the batch's last
op looks blocking: the rank issued the next op of the batch before the first had completed,
so that one looks asynchronous, and the time the rank then spent waiting for it, after the
last op had completed, looked like its own work. A send over a slow link then made its rank
"busy" rather than waiting, and a fix of the link shortened nothing in the replay.

So point-to-point ops issued back to back (no more than ``BATCH_GAP_NS`` of own time between
one's issue and the next's, in the median step) are one batch, and where the rank waited for
the batch's last op, it waited for the whole batch there: its compute resumes at the latest
completion of the batch's ops.
"""

from __future__ import annotations

import numpy as np

BATCH_GAP_NS = 100_000
"""Own time between two point-to-point issues of one batch, at most (median over steps): one
loop issues them, tens of µs apart with the probe's rows; a rank's compute between two
exchanges takes longer."""
P2P_OPS = ("send", "recv", "isend", "irecv")


def batch_waits(issue: np.ndarray, blocking: np.ndarray, ops: np.ndarray | None) -> np.ndarray:
    """(ranks, collectives) int: for each send or recv a rank went on from, the place of the
    last op of its batch, when the rank waited for that one (it waits for the whole batch
    there); -1 elsewhere. ``issue``, ``blocking``: (steps, ranks, collectives); ``ops``:
    (ranks, collectives) op names."""
    n_r, n_k = issue.shape[1:]
    waits = np.full((n_r, n_k), -1, dtype=np.int64)
    if ops is None or n_k < 2 or issue.shape[0] == 0:
        return waits
    p2p = np.isin(ops, P2P_OPS)
    gap = np.median(np.diff(issue, axis=2), axis=0)
    joined = p2p[:, :-1] & p2p[:, 1:] & (gap <= BATCH_GAP_NS)  # place k with k+1 in a batch
    if not joined.any():
        return waits
    waited = blocking.all(axis=0)
    for r in np.flatnonzero(joined.any(axis=1)):
        k = 0
        while k < n_k:
            last = k
            while last < n_k - 1 and joined[r, last]:
                last += 1
            if last > k and waited[r, last]:
                members = np.arange(k, last)
                waits[r, members[~waited[r, members]]] = last
            k = last + 1
    return waits


def held_release(release: np.ndarray, done: np.ndarray, waits: np.ndarray | None) -> np.ndarray:
    """``release`` ((steps, ranks, collectives): where each rank's compute resumed after each
    collective) no earlier than the completion of the ops each place waits for too
    (``batch_waits``)."""
    if waits is None or not (waits >= 0).any():
        return release
    out = release.copy()
    for j in np.flatnonzero((waits >= 0).any(axis=0)):
        ranks = np.flatnonzero(waits[:, j] >= 0)
        at = waits[ranks, j]
        out[:, ranks, at] = np.maximum(out[:, ranks, at], done[:, ranks, j])
    return out


def held_at(waits: np.ndarray | None, n_k: int) -> list[list[tuple[int, np.ndarray]]]:
    """Per place k: the (place j, ranks bool) pairs whose op j those ranks wait for at k."""
    out: list[list[tuple[int, np.ndarray]]] = [[] for _ in range(n_k)]
    if waits is None:
        return out
    for j in np.flatnonzero((waits >= 0).any(axis=0)):
        for k in np.unique(waits[waits[:, j] >= 0, j]):
            out[int(k)].append((int(j), waits[:, j] == k))
    return out
