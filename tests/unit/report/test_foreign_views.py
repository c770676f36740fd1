"""``analyze``'s views of foreign traces as documents: the source lines, Horovod's tables and
the GPU activity say the same on the terminal, the page (escaped) and in JSON."""

from __future__ import annotations

import html
import io
from pathlib import Path

from rich.console import Console

from scalescope.events import EventTable, Run, RunMeta
from scalescope.ingest import IngestResult
from scalescope.ingest.kineto_gpu import GpuActivity
from scalescope.ingest.result import HorovodPhase, HorovodWait
from scalescope.report.media.html import document_html
from scalescope.report.views.gpu import gpu_document, render_gpu_activity
from scalescope.report.views.horovod import (
    horovod_document,
    ingest_source_document,
    render_horovod_phases,
    render_ingest_source,
)

HOSTILE = "<b>x</b> [bold]&"


def result(**kw) -> IngestResult:
    meta = RunMeta(run_id="t", command=[], script="", world_size=1)
    run = Run(Path("/nowhere"), meta, EventTable.empty(), {})
    return IngestResult(format="horovod", run=run, problems=[HOSTILE], files=("/a/t.json",), **kw)


def text(render, res: IngestResult) -> str:
    console = Console(file=io.StringIO(), width=160, color_system=None)
    render(res, console)
    return console.file.getvalue()


def test_horovod_tables_and_source_on_every_renderer():
    phase = HorovodPhase(HOSTILE, 1234.5, 1000.25, 12.3456, 100)
    wait = HorovodWait("all_reduce", "gradients", 4 << 20, 10, 1500.0, 3000.0, None, 500.0, 75.0)
    res = result(horovod_phases=(phase,), horovod_waits=(wait,))
    shown = text(render_ingest_source, res) + text(render_horovod_phases, res)
    assert "Read: t.json" in shown and f"problem: {HOSTILE}" in shown
    assert "1,234.500" in shown and "4.00 MiB" in shown and "1.500" in shown and "75.0" in shown
    page = document_html(horovod_document(res)) + document_html(ingest_source_document(res))
    assert html.escape(HOSTILE) in page and "<b>x" not in page and "4.00 MiB" in page
    blocks = horovod_document(res).blocks
    assert blocks[0].values[0] == (HOSTILE, 1234.5, 1000.25, 12.3456, 100)
    assert blocks[-1].values[0][2] == 4 << 20


def test_gpu_activity_only_with_device_events():
    assert text(render_gpu_activity, result()) == ""
    row = GpuActivity(0, 10, 5.0, 2, 1.5, 3, 0.5, 2048, 1, 0.1, 20.0, 6.0, 70.0, 1.5, 1.2, 20.0)
    res = result(gpu=(row,))
    assert "2.00 KiB" in text(render_gpu_activity, res) and "70.0" in text(render_gpu_activity, res)
    assert gpu_document(res).blocks[0].values[0][-3:] == (70.0, 1.2, 20.0)
    quiet = result(gpu=(GpuActivity(0, 10, 5.0, 0, 0.0, 3, 0.5, 2048, 1, 0.1, 20.0, 6.0, 70.0),))
    assert gpu_document(quiet).blocks[0].rows[0][-1] == "–", "no NCCL kernel: no overlap"
