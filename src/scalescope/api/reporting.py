"""A run's report as the commands and the public API make it: a ``Recording`` printed and
written through the renderers' registry (JSON, HTML dashboard, Chrome timeline); a scale
study's table from its points' run directories."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from scalescope.diagnose.recording import Recording
from scalescope.diagnose.thresholds import DEFAULT_THRESHOLDS, Thresholds
from scalescope.events.run import RunDirError
from scalescope.report.formatting import report_console
from scalescope.report.subjects import RunReport

if TYPE_CHECKING:
    from scalescope.analyze.runs.scaling import ScalingTable
    from scalescope.events.study import ScaleStudy


@dataclass(frozen=True)
class ReportFiles:
    json: Path | None = None
    html: Path | None = None
    timeline: Path | None = None
    steps: int | None = None
    """Steps in the timeline and the dashboard's timeline (default: a few after warm-up)."""
    ranks: str | None = None
    """``--ranks`` of the timeline (report/views/rank_select.py; default: all up to 16 ranks)."""


def run_report(rec: Recording, files: ReportFiles = ReportFiles()) -> RunReport:
    """What the report's renderers draw, gathered once from the recording: its clock offsets
    (only for a timeline: the dashboard's or ``files.timeline``), the dashboard's rank-step
    grid (only with ``files.html``), the stored projection, and the diagnosis (not for a
    timeline alone)."""
    from scalescope.analyze.ranks.clocks import clock_offsets
    from scalescope.predict.stored import stored_projection
    from scalescope.report.media.timeline import default_steps

    analysis, run = rec.analysis, rec.run
    grid = None
    if files.html is not None:
        from scalescope.analyze.rank_steps import rank_step_grid

        grid = rank_step_grid(analysis, run)
    steps = None
    if files.steps is not None:
        steps = default_steps(run.events, run.meta.warmup_steps, files.steps)
    drawn = files.html is not None or files.timeline is not None
    diagnosed = files.html is not None or files.json is not None or not drawn
    return RunReport(
        analysis=analysis,
        run=run,
        diagnosis=rec.diagnosis if diagnosed else None,
        offsets_ns=clock_offsets(analysis.clocks) if drawn else {},
        grid=grid,
        projection=stored_projection(run.path) if files.html is not None else None,
        steps=steps,
        ranks=files.ranks,
        ingest=getattr(rec, "ingest", None),
    )


def write_outputs(rec: Recording, files: ReportFiles) -> list[Path]:
    """Write each file asked for through the renderer its flag names."""
    from scalescope.report.renderers import write

    report = run_report(rec, files)
    asked = (("json", files.json), ("html", files.html), ("timeline", files.timeline))
    return [write(report, output, path) for output, path in asked if path is not None]


def print_run_report(rec: Recording, console: Console) -> None:
    """What ``scalescope report`` prints: the run's report, then its findings."""
    from scalescope.report.media.terminal import render_document
    from scalescope.report.renderers import render

    render_document(render(run_report(rec), "terminal"), console)


def report_run(
    run_dir: Path,
    files: ReportFiles,
    terminal: bool = True,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
) -> list[Path]:
    """Load a run directory, print its report and write every view asked for."""
    rec = Recording.load(run_dir, thresholds)
    if terminal:
        print_run_report(rec, report_console())
    return write_outputs(rec, files)


def study_table(study_dir: Path, study: ScaleStudy) -> ScalingTable:
    """The scaling table from each point's own run directory (a missing one is no breakdown)."""
    from scalescope.analyze.runs.scaling import scaling_table

    analyses = {}
    for p in study.points:
        try:
            analyses[p.ranks] = (
                Recording.load(study_dir / p.run_dir).analysis if p.run_dir else None
            )
        except RunDirError:
            analyses[p.ranks] = None
    return scaling_table(study, analyses)


def report_study(study_dir: Path, html: Path | None, console: Console) -> list[Path]:
    """Print a recorded study's table (``scalescope report STUDY_DIR``); write its page."""
    from scalescope.events.study import load_study
    from scalescope.report.media.terminal import render_document
    from scalescope.report.renderers import render, write

    table = study_table(study_dir, load_study(study_dir))
    render_document(render(table, "terminal"), console)
    return [] if html is None else [write(table, "html", html)]
