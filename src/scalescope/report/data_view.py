"""``scalescope data``: progress bars and summaries of pack, stage and bench."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.table import Table

from scalescope.report.formatting import fmt_bytes

if TYPE_CHECKING:  # the data tools import torch: a progress bar must not
    from scalescope.bench.shard_manifest import Manifest
    from scalescope.data.speed import Ratio, Speed
    from scalescope.data.stage import StageResult


@contextmanager
def byte_progress(console: Console, description: str) -> Iterator[Callable[[int, int], None]]:
    """A bar of bytes done; yields ``advance(nbytes, total_bytes)``. Hidden off a terminal."""
    progress = Progress(
        TextColumn(escape(description)),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )
    task = progress.add_task(description, total=None)

    def advance(nbytes: int, total: int) -> None:
        progress.update(task, advance=nbytes, total=total)

    with progress:
        yield advance


@contextmanager
def run_progress(console: Console, description: str, total: int) -> Iterator[Callable[[], None]]:
    """A bar of runs done out of ``total``; yields ``advance()``. Hidden off a terminal."""
    progress = Progress(
        TextColumn(escape(description)),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )
    task = progress.add_task(description, total=total)
    with progress:
        yield lambda: progress.advance(task)


def render_pack(manifest: Manifest, out: str, console: Console) -> None:
    """Printed on a console with markup off: paths appear verbatim."""
    mean = manifest.nbytes / len(manifest.shards)
    console.print(
        f"packed {manifest.images:,} images of {len(manifest.classes)} classes into "
        f"{len(manifest.shards)} shards ({fmt_bytes(manifest.nbytes)}, "
        f"{fmt_bytes(int(mean))} per shard on average) in {out}"
    )


def render_stage(result: StageResult, source: str, console: Console) -> None:
    where = "" if result.local_rank is None else (
        f"node {result.node_rank}, local rank {result.local_rank}: "
    )  # fmt: skip
    dest = result.dest
    if result.action == "copied":
        console.print(
            f"{where}staged {result.files} shards ({fmt_bytes(result.nbytes)}) "
            f"from {source} to {dest}"
        )
    elif result.action == "waited":
        console.print(f"{where}{dest} staged by local rank 0")
    else:
        console.print(f"{where}{dest} is up to date")


def render_speed(
    speeds: Sequence[Speed], ratios: Sequence[Ratio], console: Console, cold: bool = False
) -> None:
    title = "Input pipeline speed (decode + training transforms" + (", cold)" if cold else ")")
    table = Table(title=title, title_justify="left")
    if cold:
        table.caption = "cold: every file of every path dropped from the page cache before each run"
        table.caption_justify = "left"
    for col in ("data", "kind", "workers", "images/s (median)", "images/s per round"):
        table.add_column(col, justify="left" if col in ("data", "kind") else "right")
    for s in speeds:
        rounds = ", ".join(f"{v:.0f}" for v in s.images_per_s)
        table.add_row(s.path, s.kind, str(s.workers), f"{s.median:.1f}", rounds)
    console.print(table)
    for r in ratios:
        console.print(
            f"workers {r.workers}: shards {r.shards_images_per_s:.1f} images/s vs folder "
            f"{r.folder_images_per_s:.1f} images/s: ratio {r.ratio:.2f}x"
        )
