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
from scalescope.report.media.report_json import dump_json, report_json

if TYPE_CHECKING:
    from scalescope.analyze.scaling import ScalingTable
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


def write_outputs(
    analysis: RunAnalysis, run: Run, files: ReportFiles, diagnosis: Diagnosis | None = None
) -> list[Path]:
    written = []
    steps = None
    if files.steps is not None:
        from scalescope.report.media.timeline import default_steps

        steps = default_steps(run.events, run.meta.warmup_steps, files.steps)
    if files.json is not None:
        dump_json(files.json, report_json(analysis, diagnosis))
        written.append(files.json)
    if files.html is not None:
        from scalescope.report.views.dashboard import render_html
        from scalescope.report.views.project_section import projection_section, stored_projection

        projection = projection_section(stored_projection(run.path))
        page = render_html(analysis, run, steps, diagnosis, [projection])
        files.html.write_text(page, encoding="utf-8")
        written.append(files.html)
    if files.timeline is not None:
        from scalescope.report.media.timeline import write_timeline
        from scalescope.report.views.rank_select import selected_trace

        write_timeline(files.timeline, selected_trace(analysis, run, steps, files.ranks))
        written.append(files.timeline)
    return written


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
    from scalescope.analyze.scaling import scaling_table

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
    from scalescope.report.views.scaling import render_scaling, render_scaling_html

    table = study_table(study_dir, load_study(study_dir))
    render_scaling(table, console)
    if html is None:
        return []
    html.write_text(render_scaling_html(table), encoding="utf-8")
    return [html]
