"""`top --connect HOST:PORT`'s frame: a run watched from any node, through the job's store.

The relays beside the ranks publish each rank's live state there (launch/channel/store.py)
and live/store_view.py's ``StoreTop`` polls them, so this view needs no run directory: steps
done and their rate, the phase and the last collective of every rank, the stage of the ranks
still starting, the node each runs on, and the hang verdict StoreTop gives once no rank has
progressed for 10 s. Where the relays publish their nodes' records
(launch/channel/node_record.py), the head comes from the records and the rows are the ranks
they name (each node's slowest and the one longest in a collective): at 16,384 ranks a frame
reads 1,024 records, not 16,384 states.
"""

from __future__ import annotations

from scalescope.events.live_state import LiveState
from scalescope.events.units import fmt_bytes_brief, fmt_seconds
from scalescope.report.document import Block, Column, Document, Line, Table
from scalescope.report.subjects import StoreFrame, StoreRank, StoreSummary
from scalescope.report.views.live import alert_style

MAX_ROWS = 16


def _status(r: StoreRank, now: float) -> str:
    s = r.state
    if r.ended:
        return r.ended
    if s.starting:
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


def head_line(summary: StoreSummary, world: int, records: bool) -> str:
    """From the records (``records``), the rate is the slowest node's and the ranks ended
    are counted (no row says so of every rank)."""
    slowest = "slowest node" if records else "slowest rank"
    rate = "" if summary.steps_per_s is None else f", {summary.steps_per_s:.2f} steps/s ({slowest})"
    ended = f"; {summary.ended:,} ended" if summary.ended and records else ""
    return (
        f"{summary.reporting} of {world} ranks reporting on {summary.nodes or '?'} node(s); "
        f"steps done {summary.steps_min:,} (slowest) to {summary.steps_max:,}{rate}{ended}"
    )


def store_top_document(
    ranks: list[StoreRank], world: int, now: float, stall: str | None = None,
    alert: str | None = None, unknown: list[tuple[int, str]] | None = None,
    stopped: list[str] | None = None, summary: StoreSummary | None = None,
    unknown_nodes: list[int] | None = None,
) -> Document:  # fmt: skip
    """How many ranks report and their steps, the rows worth showing, the ranks starting and
    the hang verdict (``stall``, live/store_view.py) once nothing progressed; ``unknown``:
    the ranks (and hosts) whose state in the store did not open with this job's seal.
    ``summary``: the head from the nodes' records (``ranks`` are then only those worth
    showing), ``unknown_nodes`` the relays whose record did not open."""
    unknown = unknown or []
    told = summary if summary is not None else StoreSummary.of_ranks(ranks)
    blocks: list[Block] = [Line(head_line(told, world, summary is not None), style="bold")]
    if alert:
        blocks.append(Line(alert, style=alert_style(alert)))
    blocks += [Line(text, style="bold red") for text in stopped or ()]
    blocks.append(rank_rows(ranks, now, unknown))
    if told.reporting + len(unknown) > MAX_ROWS:
        blocks.append(Line(
            f"{MAX_ROWS} of {told.reporting + len(unknown)} ranks shown: unknown, ended, stuck "
            "longest, fewest steps"
        ))  # fmt: skip
    if told.starting:
        blocks.append(Line(f"{told.starting} rank(s) still starting"))
    if stall is not None:
        blocks.append(Line(stall, style="red"))
    if unknown:
        blocks.append(Line(
            f"{len(unknown)} rank(s) unknown: their state in the store did not open with this "
            "job's seal (written without this user's key, another job's, or another key file: "
            "SCALESCOPE_KEY_FILE)", style="red",
        ))  # fmt: skip
    if unknown_nodes:
        relays = ", ".join(map(str, unknown_nodes))
        blocks.append(Line(
            f"{len(unknown_nodes)} node record(s) unknown (relay {relays}): "
            "they did not open with this job's seal (written without this user's key, another "
            "job's, a replay); their ranks are read one by one", style="red",
        ))  # fmt: skip
    return Document("scalescope top --connect", tuple(blocks))


def frame_document(frame: StoreFrame) -> Document:
    return store_top_document(
        list(frame.ranks), frame.world, frame.now, frame.stall, frame.alert,
        list(frame.unknown), list(frame.stopped), frame.summary, list(frame.unknown_nodes),
    )  # fmt: skip
