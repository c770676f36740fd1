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

    @property
    def asked(self) -> list[tuple[str, Path]]:
        """(output, path) of each file asked for."""
        outputs = (("json", self.json), ("html", self.html), ("timeline", self.timeline))
        return [(output, path) for output, path in outputs if path is not None]


def run_report(
    rec: Recording, files: ReportFiles = ReportFiles(), printed: bool = True
) -> RunReport:
    """What the report's renderers draw, gathered once from the recording: the stored
    projection and the dashboard's rank-step grid (only with ``files.html``), the clock
    offsets (only for a timeline: the dashboard's or ``files.timeline``), and the diagnosis
    (unless a timeline alone is written)."""
    from scalescope.analyze.rank_steps import rank_step_grid
    from scalescope.analyze.ranks.clocks import clock_offsets
    from scalescope.predict.stored import stored_projection
    from scalescope.report.media.timeline import default_steps

    analysis, run, page = rec.analysis, rec.run, files.html is not None
    steps = None
    if files.steps is not None:
        steps = default_steps(run.events, run.meta.warmup_steps, files.steps)
    drawn = page or files.timeline is not None
    diagnosed = printed or page or files.json is not None
    return RunReport(
        analysis=analysis,
        run=run,
        diagnosis=rec.diagnosis if diagnosed else None,
        projection=stored_projection(run.path) if page else None,
        grid=rank_step_grid(analysis, run) if page else None,
        offsets_ns=clock_offsets(analysis.clocks) if drawn else {},
        steps=steps,
        ranks=files.ranks,
        ingest=getattr(rec, "ingest", None),
    )


def write_outputs(report: RunReport, files: ReportFiles) -> list[Path]:
    """Write each file asked for through the renderer its flag names."""
    from scalescope.report.renderers import write

    return [write(report, output, path) for output, path in files.asked]


def print_run_report(report: RunReport, console: Console) -> None:
    """What ``scalescope report`` prints: the run's report, then its findings."""
    from scalescope.report.media.terminal import render_document
    from scalescope.report.renderers import document

    render_document(document(report), console)


def report_run(
    run_dir: Path,
    files: ReportFiles,
    terminal: bool = True,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
) -> list[Path]:
    """Load a run directory, print its report and write every view asked for, from one
    gathering of what they draw."""
    from scalescope.report.media.terminal import render_document
    from scalescope.report.renderers import document, write

    report = run_report(Recording.load(run_dir, thresholds), files, printed=terminal)
    if terminal:
        render_document(document(report), report_console())
    return [write(report, output, path) for output, path in files.asked]


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
