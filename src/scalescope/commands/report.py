"""`scalescope report`, `compare` and `analyze`: load or ingest a run, analyse and diagnose it,
print it and write the views asked for (JSON, HTML dashboard, Chrome timeline)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec
from rich.console import Console

from scalescope.analyze import RunAnalysis, analyze_run
from scalescope.diagnose.findings import Diagnosis
from scalescope.diagnose.thresholds import DEFAULT_THRESHOLDS, Thresholds
from scalescope.events.run import Run, load_run
from scalescope.report.formatting import report_console
from scalescope.report.json_report import dump_json, report_json

if TYPE_CHECKING:
    from scalescope.ingest import IngestResult


@dataclass(frozen=True)
class ReportFiles:
    json: Path | None = None
    html: Path | None = None
    timeline: Path | None = None
    steps: int | None = None
    """Steps in the timeline and the dashboard's timeline (default: a few after warm-up)."""
    ranks: str | None = None
    """``--ranks`` of the timeline (report/rank_select.py; default: all up to 16 ranks)."""


def write_outputs(
    analysis: RunAnalysis, run: Run, files: ReportFiles, diagnosis: Diagnosis | None = None
) -> list[Path]:
    written = []
    steps = None
    if files.steps is not None:
        from scalescope.report.timeline import default_steps

        steps = default_steps(run.events, run.meta.warmup_steps, files.steps)
    if files.json is not None:
        dump_json(files.json, report_json(analysis, diagnosis))
        written.append(files.json)
    if files.html is not None:
        from scalescope.report.html import render_html
        from scalescope.report.project_section import projection_section, stored_projection

        projection = projection_section(stored_projection(run.path))
        page = render_html(analysis, run, steps, diagnosis, [projection])
        files.html.write_text(page, encoding="utf-8")
        written.append(files.html)
    if files.timeline is not None:
        from scalescope.report.rank_select import selected_trace
        from scalescope.report.timeline import write_timeline

        write_timeline(files.timeline, selected_trace(analysis, run, steps, files.ranks))
        written.append(files.timeline)
    return written


def analyse_and_render(
    run: Run,
    files: ReportFiles,
    terminal: bool = True,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
) -> list[Path]:
    """Analyse, diagnose, print (report then findings) and write every view asked for."""
    from scalescope.diagnose import diagnose_run
    from scalescope.report.diagnosis_view import render_diagnosis
    from scalescope.report.terminal import render_terminal

    analysis = analyze_run(run)
    diagnosis = diagnose_run(run, analysis, thresholds)
    if terminal:
        console = report_console()
        render_terminal(analysis, console)
        render_diagnosis(diagnosis, console)
    return write_outputs(analysis, run, files, diagnosis)


def report_run(
    run_dir: Path,
    files: ReportFiles,
    terminal: bool = True,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
) -> list[Path]:
    """Analyse a run directory and write every view asked for."""
    return analyse_and_render(load_run(run_dir), files, terminal, thresholds)


def compare_run_dirs(a_dir: Path, b_dir: Path, json_file: Path | None, html: Path | None) -> None:
    from scalescope.analyze.compare import compare_runs
    from scalescope.report.compare_view import comparison_json, render_comparison
    from scalescope.report.html import render_compare_html

    run_a, run_b = load_run(a_dir), load_run(b_dir)
    a, b = analyze_run(run_a), analyze_run(run_b)
    comparison = compare_runs(a, b)
    render_comparison(comparison, report_console())
    if json_file is not None:
        json_file.write_bytes(comparison_json(comparison))
    if html is not None:
        html.write_text(render_compare_html(a, run_a, b, run_b), encoding="utf-8")


def ingest_with_progress(path: Path, console: Console | None) -> IngestResult:
    """Ingest ``path`` with a bar of the trace bytes read and the time left on ``console``
    (hidden off a terminal)."""
    from scalescope.ingest import ingest
    from scalescope.ingest.detect import trace_candidates
    from scalescope.ingest.jsonstream import reading_progress
    from scalescope.report.data_view import byte_progress

    if console is None:
        return ingest(path)
    found = trace_candidates(path) if path.is_dir() else [path] if path.is_file() else []
    total = sum(p.stat().st_size for p in found)
    with (
        byte_progress(console, f"reading {path}") as advance,
        reading_progress(lambda nbytes: advance(nbytes, total)),
    ):
        return ingest(path)


def analyze_trace(
    path: Path,
    files: ReportFiles,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
    progress: Console | None = None,
) -> list[Path]:
    """Ingest another tool's trace and give it the same views as a recorded run."""
    from scalescope.report.gpu_view import render_gpu_activity
    from scalescope.report.horovod_view import render_horovod_phases, render_ingest_source

    result = ingest_with_progress(Path(path), progress)
    render_ingest_source(result, report_console())
    written = analyse_and_render(result.run, files, thresholds=thresholds)
    render_horovod_phases(result, report_console())
    render_gpu_activity(result, report_console())
    if files.json is not None:
        doc = msgspec.json.decode(files.json.read_bytes())
        doc["ingest"] = {
            "format": result.format,
            "files": [str(f) for f in result.files],
            "problems": list(result.problems),
            "horovod_phases": msgspec.to_builtins(result.horovod_phases),
            "horovod_waits": msgspec.to_builtins(result.horovod_waits),
            "gpu": msgspec.to_builtins(result.gpu),
        }
        dump_json(files.json, doc)
    return written
