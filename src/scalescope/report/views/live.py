"""The live view of a run: header, one row per rank (or a summary of many), their last words."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from rich.text import Text

from scalescope.analyze.layouts.coordinates import RankPlace
from scalescope.analyze.live import DEAD, LIVE_PHASES, LiveSnapshot, RankLive
from scalescope.analyze.step_histogram import StepHistogram
from scalescope.events.units import UNKNOWN, fmt_elapsed, fmt_mib, fmt_ms
from scalescope.report.document import (
    Block,
    Column,
    Document,
    Line,
    Preformatted,
    Style,
    Table,
)
from scalescope.report.subjects import LiveExtras, LiveFrame

BAR_WIDTH = 24
PHASE_MARKS: dict[str, tuple[str, Style]] = {
    "data": ("d", "yellow"),
    "to_device": ("h", "cyan"),
    "forward": ("f", "green"),
    "backward": ("b", "blue"),
    "comm_wait": ("c", "red"),
    "optimizer": ("o", "magenta"),
    "other": (".", ""),
}
"""A letter per phase, so the bar reads without colour too."""
MAX_ROWS = 16
"""More ranks than this are summarised: the slowest and fastest few, a histogram."""
SLOWEST, FASTEST = 8, 4
HIST_BLOCKS = " ▁▂▃▄▅▆▇█"


def phase_letters(rank: RankLive, width: int = BAR_WIDTH) -> str:
    """One letter per cell, each phase's share of the step's cells (PHASE_MARKS)."""
    total = sum(ms for _, ms in rank.phases_ms)
    if total <= 0:
        return ""
    widths = {name: ms / total * width for name, ms in rank.phases_ms}
    bar, used = "", 0
    for name in LIVE_PHASES:
        cells = min(round(widths.get(name, 0.0)), width - used)
        bar += PHASE_MARKS[name][0] * cells
        used += cells
    return bar


def phase_bar(rank: RankLive, width: int = BAR_WIDTH) -> Text:
    """The letters in their phases' colours."""
    bar = Text()
    for run, style in PHASE_COLUMN.mark_runs(phase_letters(rank, width)):
        bar.append(run, style=style)
    return bar


def _dead(rank: RankLive) -> bool:
    return rank.status in DEAD or rank.status == "silent"


def status_words(rank: RankLive) -> str:
    """``running``, ``starting (model, 12 s)``; dead and silent ranks in capitals."""
    return rank.status.upper() if _dead(rank) else rank.status_words


def starting_summary(ranks: Sequence[RankLive]) -> Line | None:
    """``starting: 12 in import (up to 41 s), 8 in init_process_group (up to 12 s)``."""
    by_stage: dict[str, list[float]] = {}
    for r in ranks:
        if r.status == "starting":
            by_stage.setdefault(r.stage or "unknown stage", []).append(r.stage_for_s or 0.0)
    if not by_stage:
        return None
    parts = [f"{len(s)} in {name} (up to {max(s):.0f} s)" for name, s in by_stage.items()]
    return Line("starting: " + ", ".join(parts))


def header(snap: LiveSnapshot, extras: LiveExtras) -> tuple[Line, Line]:
    now = "-" if snap.samples_per_s_now is None else f"{snap.samples_per_s_now:,.1f}"
    mean = "-" if snap.samples_per_s_mean is None else f"{snap.samples_per_s_mean:,.1f}"
    first = Line(
        f"{snap.run_id}  {snap.status}  elapsed {fmt_elapsed(snap.elapsed_s)}  steps "
        f"{snap.steps_done}  samples/s now {now}, mean {mean}  ranks {snap.world_size}",
        label="scalescope top",
        style="bold",
    )
    return first, Line(f"verdict so far: {extras.finding or 'none yet'}")


def shown_ranks(snap: LiveSnapshot, max_rows: int = MAX_ROWS) -> list[RankLive]:
    """All ranks, or the dead and silent ones, the slowest and the fastest; rows left over
    go to the ranks starting longest."""
    if len(snap.ranks) <= max_rows:
        return list(snap.ranks)
    marked = [r for r in snap.ranks if r.status in DEAD or r.status == "silent"][:max_rows]
    timed = sorted((r for r in snap.ranks if r.step_ms is not None), key=lambda r: -r.step_ms)
    picked = {r.rank: r for r in [*marked, *timed[:SLOWEST], *timed[-FASTEST:]]}
    starting = sorted((r for r in snap.ranks if r.status == "starting" and r.rank not in picked),
                      key=lambda r: (-(r.stage_for_s or 0.0), r.rank))  # fmt: skip
    picked.update((r.rank, r) for r in starting[: max(max_rows - len(picked), 0)])
    return sorted(picked.values(), key=lambda r: (-(r.step_ms or 0.0), r.rank))


PHASE_COLUMN = Column("phases", align="left", marks=tuple(PHASE_MARKS.values()))
RANK_COLUMNS = (
    Column("rank"),
    Column("status", align="left", no_wrap=True),
    Column("steps"),
    Column("step ms"),
    PHASE_COLUMN,
    Column("waiting ms"),
    Column("memory"),
)
CPU_COLUMN = Column("on CPU %")
"""Shown where any rank's CPU rows cover its phases (on_cpu_share)."""


def place_words(place: RankPlace | None) -> str:
    """``stage 1 · dp 3 · tp 0``; ``stages 0, 2`` for an interleaved schedule's rank; an
    inferred dimension's name is followed by a colon (``stride 2: 1``)."""
    if place is None:
        return "-"
    parts = []
    if place.stages:
        many = len(place.stages) > 1
        parts.append(f"stage{'s' if many else ''} {', '.join(map(str, place.stages))}")
    parts += [f"{dim}{':' if ' ' in dim else ''} {i}" for dim, i in place.coords]
    return " · ".join(parts) or "-"


PLACE_COLUMN = Column("place", align="left", no_wrap=True)


def rank_table(
    ranks: list[RankLive], straggler: int | None, places: Mapping[int, RankPlace] | None = None
) -> Table:
    """One row per rank; a ``place`` column beside the rank where ``places`` has any, an ``on
    CPU %`` one after the waiting where any rank's CPU share is known."""
    cpu = any(r.on_cpu_pct is not None for r in ranks)
    rows = tuple(
        (
            f"{r.rank}*" if r.rank == straggler else str(r.rank),
            *((place_words(places.get(r.rank)),) if places else ()),
            status_words(r),
            str(r.steps),
            fmt_ms(r.step_ms),
            phase_letters(r),
            fmt_ms(r.waiting_ms),
            *((fmt_share(r.on_cpu_pct),) if cpu else ()),
            fmt_mib(r.memory_bytes),
        )
        for r in ranks
    )
    place, extra = ("",) if places else (), ("",) if cpu else ()
    cell_styles = tuple(
        ("", *place, "bold red" if _dead(r) else "", "", "", "", "", *extra, "") for r in ranks
    )
    columns = (*RANK_COLUMNS[:-1], *((CPU_COLUMN,) if cpu else ()), RANK_COLUMNS[-1])
    if places:
        columns = (columns[0], PLACE_COLUMN, *columns[1:])
    return Table("", columns, rows, cell_styles=cell_styles, frame="none")


def fmt_share(pct: float | None) -> str:
    return UNKNOWN if pct is None else f"{pct:.0f}"


def histogram(found: StepHistogram | None) -> Line | None:
    """Step times of all ranks as one line of blocks, from the fastest to the slowest."""
    if found is None:
        return None
    top, levels = max(found.counts), len(HIST_BLOCKS) - 1
    blocks = "".join(HIST_BLOCKS[math.ceil(c / top * levels)] for c in found.counts)
    return Line(
        f"step ms of {found.ranks} ranks: {found.low_ms:,.1f} {blocks} {found.high_ms:,.1f}"
    )


def legend() -> Line:
    runs = tuple(
        (f"{PHASE_MARKS[name][0]} {'exposed comm' if name == 'comm_wait' else name}  ",
         PHASE_MARKS[name][1])
        for name in LIVE_PHASES
    )  # fmt: skip
    return Line("phases: ", after=runs)


def _many_ranks(snap: LiveSnapshot, shown: int) -> list[Block]:
    """What stands for the ranks left out: how many, their step times, their stages."""
    if shown == len(snap.ranks):
        return []
    told = Line(
        f"{shown} of {len(snap.ranks)} ranks shown: slowest, fastest, and every dead or silent one"
    )
    return [told, *(b for b in (histogram(snap.step_histogram), starting_summary(snap.ranks)) if b)]


def alert_style(message: str) -> str:
    """The header's style of an alert's sentence: green once it no longer holds a slowdown
    open (recovered, or taken as the new normal), else bold red."""
    closed = " recovered " in message or " is the new normal " in message
    return "green" if closed else "bold red"


def live_document(snap: LiveSnapshot, extras: LiveExtras = LiveExtras()) -> Document:
    """Header, one row per rank shown, the ranks left out, the legend, last words, output."""
    shown = shown_ranks(snap)
    blocks: list[Block] = [*header(snap, extras)]
    if extras.alert:
        blocks.append(Line(extras.alert, style=alert_style(extras.alert)))
    blocks += [Line(text, style="bold red") for text in extras.stopped]
    blocks.append(rank_table(shown, snap.straggler, snap.places))
    blocks += [*_many_ranks(snap, len(shown)), legend()]
    blocks += [
        Line(f"rank {r.rank} {r.status}: {r.last_words}", style="red")
        for r in snap.ranks
        if r.last_words
    ]
    if extras.output:
        blocks += [Line("── output ──", style="note"), Preformatted(tuple(extras.output))]
    if extras.note:
        blocks.append(Line(extras.note, style="note"))
    return Document(f"scalescope top {snap.run_id}", tuple(blocks))


def frame_document(frame: LiveFrame) -> Document:
    return live_document(frame.snapshot, frame.extras)
