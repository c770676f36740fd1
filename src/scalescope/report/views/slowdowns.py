"""The run report's slowdowns: each one the launcher's watch named while the run trained
(``alerts.jsonl``), its steps, who and which phase, the step before and after, the time it
cost, and what the what-if says fixing its subject buys (analyze/watch/slowdown_replay.py)."""

from __future__ import annotations

from scalescope.analyze import RunAnalysis
from scalescope.analyze.watch.slowdown_replay import SlowdownCost
from scalescope.report.document import Column, Line, Section, Table

COLUMNS = (
    Column("#"),
    Column("steps", align="left", no_wrap=True),
    Column("who", align="left"),
    Column("phase", align="left", no_wrap=True),
    Column("step before", "ms"),
    Column("step after", "ms"),
    Column("lost", "s"),
    Column("lost", "% of steps"),
    Column("what-if fix", align="left", no_wrap=True),
)
MEANING = (
    "steps: from its onset to its recovery (or the last step); lost: the steps' mean over "
    "ranks less the step before it, summed; what-if fix: what fixing its subject buys per "
    "step, replayed over the run"
)


def _who(c: SlowdownCost) -> str:
    a = c.onset
    if a.subject == "node":
        return f"node {', '.join(a.nodes)}"
    if a.subject == "link":
        return "link " + (" <-> ".join(a.nodes) if len(a.nodes) == 2 else f"inside {a.nodes[0]}")
    if a.subject == "world":
        return "every rank" if a.category != "communication" else "collectives"
    node = f" ({', '.join(a.nodes)})" if len(a.nodes) == 1 else ""
    return f"rank {', '.join(map(str, a.ranks))}{node}"


def _fix(c: SlowdownCost) -> str:
    if c.fix_gain_ms is None:
        return "-"
    return f"{c.fix_cause} {c.fix_gain_ms:+.2f} ms/step"


def slowdowns_section(a: RunAnalysis) -> Section | None:
    if not a.slowdowns:
        return None
    values, rows = [], []
    for i, c in enumerate(a.slowdowns, 1):
        o = c.onset
        end = "the end" if c.recovery_step is None else f"{c.recovery_step:,}"
        phase = o.phase if o.phase_change_pct is None else f"{o.phase} {o.phase_change_pct:+.0f} %"
        values.append((i, f"{o.since_step}-{c.recovery_step}", _who(c), o.phase, o.baseline_ms,
                       o.now_ms, c.lost_s, c.lost_pct, c.fix_gain_ms))  # fmt: skip
        rows.append((str(i), f"{o.since_step:,} to {end}", _who(c), phase,
                     f"{o.baseline_ms:,.1f}", f"{o.now_ms:,.1f}", f"{c.lost_s:,.2f}",
                     f"{c.lost_pct:.1f}", _fix(c)))  # fmt: skip
    table = Table("Slowdowns the watch named while it trained", COLUMNS, tuple(rows),
                  tuple(values), html_id="slowdowns", caption=MEANING)  # fmt: skip
    lines = tuple(Line("; ".join(filter(None, (c.onset.message, c.pause_words))))
                  for c in a.slowdowns)  # fmt: skip
    return Section("Slowdowns while it trained", (table, *lines), html_id="slowdowns-section")
