"""`top --connect HOST:PORT`'s frame: a run watched from any node, through the job's store.

The relays beside the ranks publish each rank's live state there (launch/channel/store.py)
and live/store_view.py's ``StoreTop`` polls them, so this view needs no run directory: steps
done and their rate, the phase and the last collective of every rank, the stage of the ranks
still starting, the node each runs on, and the hang verdict StoreTop gives once no rank has
progressed for 10 s. At 1,024 ranks a frame is one multi_get of 288 KiB (sealed) and the 16
ranks worth showing.
"""

from __future__ import annotations

from scalescope.events.live_state import LiveState
from scalescope.events.units import fmt_bytes_brief, fmt_seconds
from scalescope.report.document import Block, Column, Document, Line, Table
from scalescope.report.subjects import StoreFrame, StoreRank
from scalescope.report.views.live import alert_style

MAX_ROWS = 16


def _status(r: StoreRank, now: float) -> str:
    s = r.state
    if r.ended:
        return r.ended
    if s.stage and s.stage != "running" and s.steps_done == 0:
        since = f", {fmt_seconds(now - s.stage_since_s)}" if s.stage_since_s else ""
        return f"starting ({s.stage}{since})"
    return "running"


def _interest(r: StoreRank, now: float) -> tuple:
    """Ranks worth a row first: ended, stuck longest in a collective, fewest steps."""
    s = r.state
    stuck = now - s.entered_s if s.in_collective and s.entered_s else 0.0
    return (not r.ended, -stuck, s.steps_done, s.rank)


STORE_COLUMNS = tuple(
    Column(name, align="right" if name in ("steps", "steps/s") else "left")
    for name in ("rank", "host", "status", "steps", "steps/s", "phase (for)", "last collective")
)


def _phase(s: LiveState, now: float) -> str:
    since = f" ({fmt_seconds(now - s.phase_since_s)})" if s.phase_since_s else ""
    return (s.phase or "-") + since


def _collective(s: LiveState, now: float) -> str:
    if not s.op:
        return "-"
    where = "in it" if s.in_collective else "left"
    since = s.entered_s if s.in_collective else s.left_s
    text = f"{s.op} #{s.seq} ({fmt_bytes_brief(s.nbytes)}) {where}"
    return text + (f" {fmt_seconds(now - since)}" if since else "")


def rank_rows(ranks: list[StoreRank], now: float, unknown: list[tuple[int, str]]) -> Table:
    """The unknown ranks first (nothing about them can be believed), then the known ones
    worth showing."""
    rows = [(str(rank), host or "?", "unknown", "-", "-", "-", "-") for rank, host in unknown]
    shown = sorted(ranks, key=lambda r: _interest(r, now))[: max(MAX_ROWS - len(rows), 0)]
    rows += [
        (
            str(r.state.rank),
            r.host or "?",
            _status(r, now),
            f"{r.state.steps_done:,}",
            "-" if r.steps_per_s is None else f"{r.steps_per_s:.2f}",
            _phase(r.state, now),
            _collective(r.state, now),
        )
        for r in shown
    ]
    return Table("", STORE_COLUMNS, tuple(rows[:MAX_ROWS]), frame="inner")


def store_top_document(
    ranks: list[StoreRank], world: int, now: float, stall: str | None = None,
    alert: str | None = None, unknown: list[tuple[int, str]] | None = None,
    stopped: list[str] | None = None,
) -> Document:  # fmt: skip
    """How many ranks report and their steps, the rows worth showing, the ranks starting and
    the hang verdict (``stall``, live/store_view.py) once nothing progressed; ``unknown``:
    the ranks (and hosts) whose state in the store did not open with this job's seal."""
    unknown = unknown or []
    steps = [r.state.steps_done for r in ranks]
    hosts = {r.host for r in ranks if r.host}
    rates = [r.steps_per_s for r in ranks if r.steps_per_s is not None]
    rate = f", {min(rates):.2f} steps/s (slowest rank)" if rates else ""
    head = (
        f"{len(ranks)} of {world} ranks reporting on {len(hosts) or '?'} node(s); "
        f"steps done {min(steps, default=0):,} (slowest) to {max(steps, default=0):,}{rate}"
    )
    blocks: list[Block] = [Line(head, style="bold")]
    if alert:
        blocks.append(Line(alert, style=alert_style(alert)))
    blocks += [Line(text, style="bold red") for text in stopped or ()]
    blocks.append(rank_rows(ranks, now, unknown))
    if len(ranks) + len(unknown) > MAX_ROWS:
        told = (
            f"{MAX_ROWS} of {len(ranks) + len(unknown)} ranks shown: unknown, ended, stuck "
            "longest, fewest steps"
        )
        blocks.append(Line(told))
    starting = [r for r in ranks if _status(r, now).startswith("starting")]
    if starting:
        blocks.append(Line(f"{len(starting)} rank(s) still starting"))
    if stall is not None:
        blocks.append(Line(stall, style="red"))
    if unknown:
        blocks.append(Line(
            f"{len(unknown)} rank(s) unknown: their state in the store did not open with this "
            "job's seal (written without this user's key, another job's, or another key file: "
            "SCALESCOPE_KEY_FILE)", style="red",
        ))  # fmt: skip
    return Document("scalescope top --connect", tuple(blocks))


def frame_document(frame: StoreFrame) -> Document:
    return store_top_document(
        list(frame.ranks), frame.world, frame.now, frame.stall, frame.alert,
        list(frame.unknown), list(frame.stopped),
    )  # fmt: skip
