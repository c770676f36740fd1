"""``scalescope data``: progress bars (while the work runs) and the documents of pack, stage
and bench (what it did)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

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

from scalescope.events.units import fmt_bytes
from scalescope.report.document import Column, Document, Line, Table
from scalescope.report.subjects import LoaderSpeeds, PackedShards, StagedShards


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


def pack_document(packed: PackedShards) -> Document:
    manifest, out = packed.manifest, packed.out
    mean = manifest.nbytes / len(manifest.shards)
    line = Line(
        f"packed {manifest.images:,} images of {len(manifest.classes)} classes into "
        f"{len(manifest.shards)} shards ({fmt_bytes(manifest.nbytes)}, "
        f"{fmt_bytes(int(mean))} per shard on average) in {out}"
    )
    return Document("scalescope data pack", (line,))


def stage_document(staged: StagedShards) -> Document:
    result, source = staged.result, staged.source
    where = "" if result.local_rank is None else (
        f"node {result.node_rank}, local rank {result.local_rank}: "
    )  # fmt: skip
    dest = result.dest
    if result.action == "copied":
        text = f"staged {result.files} shards ({fmt_bytes(result.nbytes)}) from {source} to {dest}"
    elif result.action == "waited":
        text = f"{dest} staged by local rank 0"
    else:
        text = f"{dest} is up to date"
    return Document("scalescope data stage", (Line(where + text),))


SPEED_COLUMNS = tuple(
    Column(name, align="left" if name in ("data", "kind") else "right")
    for name in ("data", "kind", "workers", "images/s (median)", "images/s per round")
)


def speed_document(measured: LoaderSpeeds) -> Document:
    """Images/s of each path and worker count, then shards against folders."""
    speeds, ratios, cold = measured.speeds, measured.ratios, measured.cold
    title = "Input pipeline speed (decode + training transforms" + (", cold)" if cold else ")")
    rows = tuple(
        (s.path, s.kind, str(s.workers), f"{s.median:.1f}",
         ", ".join(f"{v:.0f}" for v in s.images_per_s))
        for s in speeds
    )  # fmt: skip
    values = tuple(
        (s.path, s.kind, s.workers, s.median, ", ".join(f"{v:.0f}" for v in s.images_per_s))
        for s in speeds
    )
    caption = "cold: every file of every path dropped from the page cache before each run"
    table = Table(title, SPEED_COLUMNS, rows, values, caption=caption if cold else "")
    lines = tuple(
        Line(
            f"workers {r.workers}: shards {r.shards_images_per_s:.1f} images/s vs folder "
            f"{r.folder_images_per_s:.1f} images/s: ratio {r.ratio:.2f}x"
        )
        for r in ratios
    )
    return Document("scalescope data bench", (table, *lines))
