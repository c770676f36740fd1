"""The live view of a run: header, one row per rank (or a summary of many), their last words."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from scalescope.analyze.live import DEAD, LIVE_PHASES, LiveSnapshot, RankLive

BAR_WIDTH = 24
PHASE_MARKS = {
    "data": ("d", "yellow"),
    "forward": ("f", "green"),
    "backward": ("b", "blue"),
    "comm_wait": ("c", "red"),
    "optimizer": ("o", "magenta"),
    "other": (".", "white"),
}
"""A letter per phase, so the bar reads without colour too."""
MAX_ROWS = 16
"""More ranks than this are summarised: the slowest and fastest few, a histogram."""
SLOWEST, FASTEST = 8, 4
HIST_BLOCKS = " ▁▂▃▄▅▆▇█"


@dataclass(frozen=True)
class LiveExtras:
    """What the view shows beside the snapshot."""

    finding: str | None = None
    """The diagnosis' first finding so far, as one phrase."""
    output: Sequence[str] = ()
    """The last lines of the script's output (``run --live``)."""
    note: str = ""


def phase_bar(rank: RankLive, width: int = BAR_WIDTH) -> Text:
    total = sum(ms for _, ms in rank.phases_ms)
    bar = Text()
    if total <= 0:
        return bar
    widths = {name: ms / total * width for name, ms in rank.phases_ms}
    used = 0
    for name in LIVE_PHASES:
        cells = round(widths.get(name, 0.0))
        cells = min(cells, width - used)
        mark, style = PHASE_MARKS[name]
        bar.append(mark * cells, style=style)
        used += cells
    return bar


def fmt_ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def fmt_bytes(value: int | None) -> str:
    return "-" if value is None else f"{value / 2**20:,.0f} MiB"


def fmt_elapsed(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def status_text(rank: RankLive) -> Text:
    """``running``, ``starting (model, 12 s)``; dead and silent ranks in capitals, red."""
    style = "bold red" if rank.status in DEAD or rank.status == "silent" else ""
    return Text(rank.status.upper() if style else rank.status_words, style=style)


def starting_summary(ranks: Sequence[RankLive]) -> Text | None:
    """``starting: 12 in import (up to 41 s), 8 in init_process_group (up to 12 s)``."""
    by_stage: dict[str, list[float]] = {}
    for r in ranks:
        if r.status == "starting":
            by_stage.setdefault(r.stage or "unknown stage", []).append(r.stage_for_s or 0.0)
    if not by_stage:
        return None
    parts = [f"{len(s)} in {name} (up to {max(s):.0f} s)" for name, s in by_stage.items()]
    return Text("starting: " + ", ".join(parts))


def header(snap: LiveSnapshot, extras: LiveExtras) -> Text:
    now = "-" if snap.samples_per_s_now is None else f"{snap.samples_per_s_now:,.1f}"
    mean = "-" if snap.samples_per_s_mean is None else f"{snap.samples_per_s_mean:,.1f}"
    text = Text.assemble(
        ("scalescope top ", "bold"), snap.run_id, f"  {snap.status}",
        f"  elapsed {fmt_elapsed(snap.elapsed_s)}  steps {snap.steps_done}",
        f"  samples/s now {now}, mean {mean}  ranks {snap.world_size}",
    )  # fmt: skip
    text.append("\nso far: ")
    text.append(extras.finding or "no finding yet")
    if snap.straggler is not None:
        where = f" ({snap.straggler_phase})" if snap.straggler_phase else ""
        text.append(f"   straggler: rank {snap.straggler}{where}", style="bold")
    return text


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


def rank_table(ranks: list[RankLive], straggler: int | None) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    for name in ("rank", "status", "steps", "step ms", "phases", "waiting ms", "memory"):
        left = name in ("status", "phases")
        table.add_column(name, justify="left" if left else "right", no_wrap=name == "status")
    for r in ranks:
        label = f"{r.rank}*" if r.rank == straggler else str(r.rank)
        table.add_row(
            label, status_text(r), str(r.steps), fmt_ms(r.step_ms), phase_bar(r),
            fmt_ms(r.waiting_ms), fmt_bytes(r.memory_bytes),
        )  # fmt: skip
    return table


def histogram(ranks: Sequence[RankLive], bins: int = 12) -> Text | None:
    """Step times of all ranks as one line of blocks, from the fastest to the slowest."""
    times = np.array([r.step_ms for r in ranks if r.step_ms is not None])
    if len(times) < 2:
        return None
    counts, edges = np.histogram(times, bins=bins)
    top = counts.max()
    blocks = "".join(HIST_BLOCKS[int(np.ceil(c / top * (len(HIST_BLOCKS) - 1)))] for c in counts)
    return Text(f"step ms of {len(times)} ranks: {edges[0]:,.1f} {blocks} {edges[-1]:,.1f}")


def legend() -> Text:
    text = Text("phases: ")
    for name in LIVE_PHASES:
        mark, style = PHASE_MARKS[name]
        label = "exposed comm" if name == "comm_wait" else name
        text.append(f"{mark} {label}  ", style=style)
    return text


def render_live(snap: LiveSnapshot, extras: LiveExtras = LiveExtras()) -> RenderableType:
    parts: list[RenderableType] = [header(snap, extras)]
    shown = shown_ranks(snap)
    parts.append(rank_table(shown, snap.straggler))
    if len(shown) < len(snap.ranks):
        parts.append(Text(f"{len(shown)} of {len(snap.ranks)} ranks shown: slowest, fastest, "
                          "and every dead or silent one"))  # fmt: skip
        hist = histogram(snap.ranks)
        if hist is not None:
            parts.append(hist)
        starting = starting_summary(snap.ranks)
        if starting is not None:
            parts.append(starting)
    parts.append(legend())
    for r in snap.ranks:
        if r.last_words:
            parts.append(Text(f"rank {r.rank} {r.status}: {r.last_words}", style="red"))
    if extras.output:
        parts.append(Text("── output ──", style="dim"))
        parts.extend(Text(line) for line in extras.output)
    if extras.note:
        parts.append(Text(extras.note, style="dim"))
    return Group(*parts)
