"""A mid-run case's live alert (issue 49): how long after the fault's onset the launcher's
slowdown watch (``alerts.jsonl``) first named the planted culprit. The onset's time is the
onset step's start on the culprit rank, from the recorded events, on the wall clock the
alerts' ``detected_at`` is on (each rank's ``wall_minus_perf_ns``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from scalescope.analyze.watch.slowdown_alerts import Alert, read_alerts
from scalescope.events import Kind, load_run

ALERT_WITHIN_S = 15.0
"""A live alert naming the culprit this long after the onset, at most, passes."""


def names(alert: Alert, culprit: str) -> bool:
    """Whether an onset alert names ``culprit`` (``rank:N``: an alert on rank N alone, or on
    the node or ranks it is one of; other culprits: never, the watch names ranks and nodes)."""
    kind, _, name = culprit.partition(":")
    if alert.event != "onset" or kind != "rank" or not name.isdigit():
        return False
    return alert.subject in ("rank", "node") and int(name) in alert.ranks


def onset_wall_s(run_dir: Path, rank: int, step: int) -> float | None:
    """When ``rank`` began step ``step`` (Unix seconds); None when it recorded no such step."""
    run = load_run(run_dir)
    ev = run.events
    hit = np.flatnonzero((ev.kind == int(Kind.STEP)) & (ev.rank == rank) & (ev.step == step))
    meta = run.ranks.get(rank)
    if not hit.size or meta is None:
        return None
    return (int(ev.start_ns[hit[0]]) + meta.wall_minus_perf_ns) / 1e9


def alert_delay_s(run_dir: Path, culprit: str | None, since: int) -> float | None:
    """Seconds from the onset step's start on the culprit rank to the first alert naming
    the culprit; None when none named it (or the culprit is no rank, or the step is not
    recorded)."""
    if culprit is None or not culprit.startswith("rank:"):
        return None
    first = next((a for a in read_alerts(run_dir) if names(a, culprit)), None)
    if first is None:
        return None
    onset = onset_wall_s(run_dir, int(culprit.partition(":")[2]), since)
    return None if onset is None else first.detected_at - onset
