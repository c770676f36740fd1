"""A run's report as the commands and the public API make it: load, analyse, diagnose, print
the report and write the views asked for (JSON, HTML dashboard, Chrome timeline); a scale
study's table from its points' run directories."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from scalescope.analyze import RunAnalysis, analyze_run
from scalescope.diagnose.findings import Diagnosis
from scalescope.diagnose.thresholds import DEFAULT_THRESHOLDS, Thresholds
from scalescope.events.run import Run, RunDirError, load_run
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


def run_report(
    analysis: RunAnalysis,
    run: Run,
    diagnosis: Diagnosis | None = None,
    files: ReportFiles = ReportFiles(),
) -> RunReport:
    """What the report's renderers draw, gathered once: the clock offsets (only for a timeline:
    the dashboard's or ``files.timeline``), the dashboard's rank-step grid (only with
    ``files.html``) and the stored projection beside the analysis."""
    from scalescope.analyze.ranks.clocks import align_clocks, clock_offsets
    from scalescope.predict.stored import stored_projection
    from scalescope.report.media.timeline import default_steps

    grid = None
    if files.html is not None:
        from scalescope.analyze.rank_steps import rank_step_grid

        grid = rank_step_grid(analysis, run)
    steps = None
    if files.steps is not None:
        steps = default_steps(run.events, run.meta.warmup_steps, files.steps)
    drawn = files.html is not None or files.timeline is not None
    offsets = clock_offsets(align_clocks(run)) if drawn else {}
    return RunReport(
        analysis=analysis,
        run=run,
        diagnosis=diagnosis,
        offsets_ns=offsets,
        grid=grid,
        projection=stored_projection(run.path) if files.html is not None else None,
        steps=steps,
        ranks=files.ranks,
    )


def write_outputs(
    analysis: RunAnalysis, run: Run, files: ReportFiles, diagnosis: Diagnosis | None = None
) -> list[Path]:
    """Write each file asked for through the renderer its flag names."""
    from scalescope.report.renderers import write

    report = run_report(analysis, run, diagnosis, files)
    asked = (("json", files.json), ("html", files.html), ("timeline", files.timeline))
    return [write(report, output, path) for output, path in asked if path is not None]


def print_run_report(analysis: RunAnalysis, diagnosis: Diagnosis, console: Console) -> None:
    """What ``scalescope report`` prints: the run's report, then its findings."""
    from scalescope.report.views.diagnosis import render_diagnosis
    from scalescope.report.views.run_terminal import render_terminal

    render_terminal(analysis, console)
    render_diagnosis(diagnosis, console)


def analyse_and_render(
    run: Run,
    files: ReportFiles,
    terminal: bool = True,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
) -> list[Path]:
    """Analyse, diagnose, print (report then findings) and write every view asked for."""
    from scalescope.diagnose import diagnose_run

    analysis = analyze_run(run)
    diagnosis = diagnose_run(run, analysis, thresholds)
    if terminal:
        print_run_report(analysis, diagnosis, report_console())
    return write_outputs(analysis, run, files, diagnosis)


def report_run(
    run_dir: Path,
    files: ReportFiles,
    terminal: bool = True,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
) -> list[Path]:
    """Analyse a run directory and write every view asked for."""
    return analyse_and_render(load_run(run_dir), files, terminal, thresholds)


def study_table(study_dir: Path, study: ScaleStudy) -> ScalingTable:
    """The scaling table from each point's own run directory (a missing one is no breakdown)."""
    from scalescope.analyze.runs.scaling import scaling_table

    analyses = {}
    for p in study.points:
        try:
            analyses[p.ranks] = analyze_run(load_run(study_dir / p.run_dir)) if p.run_dir else None
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
