"""The words for a hang (analyze/watch/hang.py): verdict sentences, the per-rank table, stacks.

Plain text, so the launcher prints the same lines it writes to ``hang.txt`` and ``report``
shows them first.
"""

from __future__ import annotations

from scalescope.analyze.watch.hang import HangReport, RankHang
from scalescope.diagnose.hang_words import verdict_line
from scalescope.events.files import HANG_FILE
from scalescope.events.units import fmt_bytes_brief, fmt_ms, fmt_seconds

ALL_RANKS_UP_TO = 16
"""Up to this many ranks, the table and the last calls list every rank; beyond, the ranks
the verdicts name and the first rank waiting on each (the others are in hang.json)."""


def shown_ranks(report: HangReport) -> list[RankHang]:
    """The ranks the text lists (``ALL_RANKS_UP_TO``)."""
    if len(report.ranks) <= ALL_RANKS_UP_TO:
        return list(report.ranks)
    named = {r for v in report.verdicts for r in (*v.ranks[:ALL_RANKS_UP_TO], *v.waiting[:1])}
    return [r for r in report.ranks if r.rank in named]


def rank_rows(report: HangReport) -> list[tuple[str, ...]]:
    """The per-rank table of ``shown_ranks``; a ``host`` column when the ranks ran on
    several nodes."""
    shown = shown_ranks(report)
    hosts = len({r.host for r in report.ranks if r.host}) > 1
    rows = [("rank", "pid", "phase (for)", "last collective", "in it?", "for")]
    for r in shown:
        phase = "gone: " + (r.ended or "?") if not r.alive else (r.phase or "not recorded")
        if r.alive and r.phase and r.phase_for_s is not None:
            phase += f" ({fmt_seconds(r.phase_for_s)})"
        coll = f"{r.op} #{r.seq} (group {r.group}, {fmt_bytes_brief(r.nbytes)})" if r.op else "none"
        inside = ("yes" if r.in_collective else "left") if r.op else "-"
        rows.append((str(r.rank), str(r.pid), phase, coll, inside, fmt_seconds(r.collective_for_s)))
    if hosts:
        rows = [
            (row[0], head, *row[1:])
            for row, head in zip(rows, ["host"] + [r.host or "?" for r in shown], strict=True)
        ]
    return rows


def ring_lines(report: HangReport) -> list[str]:
    """Each rank's last calls from its flight recorder, the latest first."""
    lines = []
    for r in shown_ranks(report):
        if r.ring_note:
            lines.append(f"  rank {r.rank}: flight recorder not read ({r.ring_note})")
        if not r.last_calls:
            continue
        calls = [
            f"{c.op} #{c.seq} (group {c.group}, {fmt_bytes_brief(c.nbytes)}, step {c.step}, "
            + ("not completed)" if c.dur_s is None else f"{fmt_ms(c.dur_s * 1e3, 2)} ms)")
            for c in r.last_calls
        ]
        lines.append(
            f"  rank {r.rank}'s last calls (flight recorder, latest first): " + "; ".join(calls)
        )
    return lines


LAUNCH_FRAMES = ("<frozen runpy>", "scalescope/probe/bootstrap.py")
"""Frames below the user's script: how scalescope started it."""


def main_stack(text: str) -> str:
    """The stack of the thread the signal interrupted (faulthandler's "Current thread"):
    the main thread, where the training loop runs."""
    at = text.find("Current thread")
    lines = (text[at:] if at >= 0 else text).rstrip().splitlines()
    while lines and any(m in lines[-1] for m in LAUNCH_FRAMES):
        lines.pop()
    return "\n".join(lines)


def hang_lines(report: HangReport, stacks: str = "all") -> list[str]:
    """The hang section: headline, verdicts, the per-rank table, then each rank's stack
    (``stacks``: all threads, main thread only, or none)."""
    seen = "seen while the run was live" if report.source == "live" else "from the events"
    lines = [
        f"HANG: no rank finished a step or a collective for {fmt_seconds(report.idle_s)} "
        f"(threshold {fmt_seconds(report.hang_after_s)}, {seen})"
    ]
    by_rank = {r.rank: r for r in report.ranks}
    lines += [f"  {verdict_line(v, by_rank)}" for v in report.verdicts]
    rows = rank_rows(report)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines += [
        "  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    lines += ring_lines(report)
    if (left := len(report.ranks) - len(shown_ranks(report))) > 0:
        lines.append(f"  ({left:,} other ranks' states and last calls: {HANG_FILE})")
    if report.unknown:
        lines.append(
            f"  rank(s) {', '.join(map(str, report.unknown))} unknown: their live state in the "
            "job's store did not open with this job's seal"
        )
    if report.action == "kill":
        lines.append("  the ranks were stopped (--hang-action kill)")
    elif report.action == "withheld":
        lines.append("  the ranks were not stopped (--hang-action kill): some rank is unknown")
    for r in report.ranks if stacks != "none" else ():
        if r.stack:
            text = r.stack if stacks == "all" else main_stack(r.stack)
            lines.append(f"  Python stack of rank {r.rank} (pid {r.pid}):")
            lines += [f"    {line}" for line in text.rstrip().splitlines()]
    return lines


def render_hang(report: HangReport) -> str:
    return "\n".join(hang_lines(report))
