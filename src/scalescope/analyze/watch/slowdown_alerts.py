"""A slowdown's alert: one line of ``alerts.jsonl`` (an onset, its recovery or its
re-baseline), its words, and the file read back."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from scalescope.events.files import ALERTS_FILE

CLOSING = ("recovery", "rebaseline")
"""The events that close an onset: the watch no longer holds it open."""


@dataclass(frozen=True)
class Alert:
    """One line of ``alerts.jsonl``: a slowdown's onset, its recovery, or its re-baseline
    (it held long enough to be the new normal: later onsets are measured against it)."""

    event: str
    """``onset``, ``recovery`` or ``rebaseline``."""
    id: int
    """The onset's number (from 1); a recovery or re-baseline carries its onset's."""
    subject: str
    """``rank``, ``node``, ``link`` (``nodes``: its two ends, or the one host it is inside;
    ``ranks``: the group whose collectives slowed) or ``world`` (every rank: its own work,
    or, for communication, its collectives)."""
    ranks: tuple[int, ...]
    nodes: tuple[str, ...]
    phase: str
    category: str
    """``input``, ``compute`` or ``communication``."""
    change_pct: float
    """The job's step since the onset against the baseline (%, + slower)."""
    phase_change_pct: float | None
    """The cause's phase since the onset against its baseline (% of the phase)."""
    baseline_ms: float
    now_ms: float
    since_step: int
    detected_step: int
    detected_at: float
    """Wall-clock seconds."""
    message: str


def _who(a: Alert) -> str:
    if a.subject == "link":
        ranks = ", ".join(map(str, a.ranks[:8])) + (", ..." if len(a.ranks) > 8 else "")
        where = " <-> ".join(a.nodes) if len(a.nodes) == 2 else f"inside {a.nodes[0]}"
        return f"link {where} (the collectives of ranks {ranks})"
    if a.subject == "world" and a.category == "communication":
        where = f"waiting most: {', '.join(a.nodes)}; " if a.nodes else ""
        return f"collectives on every rank ({where}no link told apart)"
    if a.subject == "world":
        return f"every rank ({len(a.ranks)})"
    if a.subject == "node":
        return f"node {', '.join(a.nodes)} ({len(a.ranks)} ranks)"
    shown = ", ".join(map(str, a.ranks[:8])) + (", ..." if len(a.ranks) > 8 else "")
    node = f" on node {', '.join(a.nodes)}" if len(a.nodes) == 1 else ""
    return f"rank{'s' if len(a.ranks) > 1 else ''} {shown}{node}"


def with_message(a: Alert) -> Alert:
    if a.event == "recovery":
        text = (f"slowdown {a.id} recovered at step {a.detected_step:,}: step {a.now_ms:.1f} ms "
                f"against {a.baseline_ms:.1f} ms before it ({_who(a)}, {a.phase})")  # fmt: skip
        return replace(a, message=text)
    if a.event == "rebaseline":
        text = (f"slowdown {a.id} is the new normal at step {a.detected_step:,}: step "
                f"{a.now_ms:.1f} ms held against {a.baseline_ms:.1f} ms before it ({_who(a)}, "
                f"{a.phase}); later slowdowns are measured against the new step")  # fmt: skip
        return replace(a, message=text)
    phase = f"{a.phase} {a.phase_change_pct:+.0f} %" if a.phase_change_pct is not None else a.phase
    step = f"{a.baseline_ms:.1f} -> {a.now_ms:.1f} ms ({a.change_pct:+.0f} %, {a.category})"
    text = f"slowdown: {_who(a)}: {phase} since step {a.since_step:,}; the step {step}"
    return replace(a, message=text)


def read_alerts(run_dir: Path) -> list[Alert]:
    """The alerts a run's watch wrote (none when it wrote no file); a torn last line (the
    launcher killed mid-write) is left out."""
    path = Path(run_dir) / ALERTS_FILE
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            doc = json.loads(line)
            out.append(Alert(**{**doc, "ranks": tuple(doc["ranks"]), "nodes": tuple(doc["nodes"])}))
        except (ValueError, TypeError, KeyError):
            continue
    return out


def latest_alert(alerts: list[Alert]) -> Alert | None:
    """The last onset still open, else the last recovery or re-baseline (None without
    alerts)."""
    recovered = {a.id for a in alerts if a.event in CLOSING}
    open_ = [a for a in alerts if a.event == "onset" and a.id not in recovered]
    return open_[-1] if open_ else (alerts[-1] if alerts else None)
