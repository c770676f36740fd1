"""`scalescope report`, `compare` and `analyze`: load or ingest a run, analyse and diagnose it,
print it and write the views asked for (JSON, HTML dashboard, Chrome timeline). A scale study
or a suite given to `report` prints its table again."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec
from rich.console import Console

from scalescope.analyze import analyze_run
from scalescope.api.reporting import ReportFiles, analyse_and_render, report_run, report_study
from scalescope.commands.common import CommandError, err
from scalescope.diagnose.thresholds import DEFAULT_THRESHOLDS, Thresholds
from scalescope.events.run import RunDirError, load_run
from scalescope.report.formatting import report_console
from scalescope.report.media.report_json import dump_json

if TYPE_CHECKING:
    from scalescope.ingest import IngestResult


def compare_run_dirs(a_dir: Path, b_dir: Path, json_file: Path | None, html: Path | None) -> None:
    from scalescope.analyze.compare import compare_runs
    from scalescope.report.subjects import ComparedRuns
    from scalescope.report.views.compare import comparison_json, render_comparison
    from scalescope.report.views.dashboard import render_compare_html

    run_a, run_b = load_run(a_dir), load_run(b_dir)
    a, b = analyze_run(run_a), analyze_run(run_b)
    comparison = compare_runs(a, b)
    render_comparison(comparison, report_console())
    if json_file is not None:
        json_file.write_bytes(comparison_json(comparison))
    if html is not None:
        html.write_text(
            render_compare_html(ComparedRuns(comparison=comparison, a=a, b=b)), encoding="utf-8"
        )


def ingest_with_progress(path: Path, console: Console | None) -> IngestResult:
    """Ingest ``path`` with a bar of the trace bytes read and the time left on ``console``
    (hidden off a terminal)."""
    from scalescope.ingest import ingest
    from scalescope.ingest.detect import trace_candidates
    from scalescope.ingest.jsonstream import reading_progress
    from scalescope.report.views.data import byte_progress

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
    from scalescope.report.views.gpu import render_gpu_activity
    from scalescope.report.views.horovod import render_horovod_phases, render_ingest_source

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


@dataclass(frozen=True, kw_only=True)
class ReportOutputs:
    """What ``report`` and ``analyze`` write, and how they judge: their shared options."""

    json_file: Path | None = None
    html: Path | None = None
    """The HTML dashboard."""
    timeline: Path | None = None
    """A Chrome/Perfetto trace of a few steps."""
    steps: int | None = None
    """Steps in the timelines; None: 10 after warm-up."""
    ranks: str | None = None
    """Ranks in the timeline, as given (report/views/rank_select.py)."""
    threshold: list[str] | None = None
    """Diagnosis thresholds, NAME=VALUE each."""
    baseline: Path | None = None
    """A good bench run on this machine: its FLOP/s become the expected ones."""


@dataclass(frozen=True, kw_only=True)
class ReportCommand(ReportOutputs):
    """The options of ``scalescope report``."""

    run_dir: Path
    """A run directory, a scale study's directory, or a suite's directory (or suite.json)."""


@dataclass(frozen=True, kw_only=True)
class AnalyzeCommand(ReportOutputs):
    """The options of ``scalescope analyze``."""

    path: Path
    """A torch.profiler trace (file or per-rank directory) or a Horovod timeline."""


@dataclass(frozen=True, kw_only=True)
class CompareCommand:
    """The options of ``scalescope compare``."""

    run_a: Path
    """The baseline run directory."""
    run_b: Path
    """The run compared with it (ratios B / A)."""
    json_file: Path | None = None
    html: Path | None = None
    """A side-by-side dashboard."""


def check_ranks(ranks: str | None, timeline: Path | None) -> None:
    """A ``--ranks`` value that cannot be read, or one without ``--timeline``, is a one-line
    error before anything is analysed."""
    from scalescope.report.views.rank_select import RankSpecError, parse_rank_spec

    if ranks is None:
        return
    if timeline is None:
        raise CommandError(
            "--ranks selects the ranks of the --timeline trace: give --timeline FILE too"
        )
    try:
        parse_rank_spec(ranks)
    except RankSpecError as exc:
        raise CommandError(str(exc)) from None


def diagnosis_thresholds(items: list[str] | None, baseline: Path | None) -> Thresholds:
    """The thresholds from --threshold and --baseline (a bad one fails with its reason)."""
    from scalescope.diagnose.calibrate import calibrate, parse_overrides

    try:
        thresholds = parse_overrides(items or [])
        if baseline is None:
            return thresholds
        calibration = calibrate(baseline, thresholds)
    except (ValueError, RunDirError) as exc:
        raise CommandError(str(exc)) from None
    err.print(calibration.note)
    return calibration.thresholds


def report(command: ReportCommand) -> None:
    """Print a recorded run (or study, or suite) and write the views asked for."""
    from scalescope.events.files import SCALE_STUDY_FILE, SUITE_FILE
    from scalescope.report.views.rank_select import RankSpecError

    c = command
    check_ranks(c.ranks, c.timeline)
    if (c.run_dir / SCALE_STUDY_FILE).is_file():
        report_study_dir(c.run_dir, c.json_file, c.html, c.timeline)
        return
    if c.run_dir.is_file() or (c.run_dir / SUITE_FILE).is_file():
        report_suite(c.run_dir, c.json_file or c.html or c.timeline)
        return
    files = ReportFiles(json=c.json_file, html=c.html, timeline=c.timeline, steps=c.steps,
                        ranks=c.ranks)  # fmt: skip
    thresholds = diagnosis_thresholds(c.threshold, c.baseline)
    try:
        written = report_run(c.run_dir, files, thresholds=thresholds)
    except (RunDirError, RankSpecError) as exc:
        raise CommandError(str(exc)) from None
    for path in written:
        err.print(f"wrote {path}")


def report_study_dir(
    study_dir: Path, json_file: Path | None, html: Path | None, timeline: Path | None
) -> None:
    from scalescope.events.files import SCALE_STUDY_FILE

    if json_file or timeline:
        raise CommandError(
            f"{study_dir} is a scale study: its JSON is {SCALE_STUDY_FILE}; no timeline"
        )
    try:
        written = report_study(study_dir, html, report_console())
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    for path in written:
        err.print(f"wrote {path}")


def report_suite(path: Path, other_output: Path | None) -> None:
    from scalescope.events.files import SUITE_FILE
    from scalescope.events.suite import load_suite
    from scalescope.report.media.terminal import render_document
    from scalescope.report.renderers import render
    from scalescope.report.views.suite import suite_console

    if other_output:
        raise CommandError(f"{path} is a suite: its JSON is {SUITE_FILE}; no HTML or timeline")
    try:
        result = load_suite(path)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    render_document(render(result, "terminal"), suite_console())


def analyze(command: AnalyzeCommand) -> None:
    """Ingest another tool's trace, print its report and write the views asked for."""
    from scalescope.ingest import IngestError
    from scalescope.report.views.rank_select import RankSpecError

    c = command
    check_ranks(c.ranks, c.timeline)
    files = ReportFiles(json=c.json_file, html=c.html, timeline=c.timeline, steps=c.steps,
                        ranks=c.ranks)  # fmt: skip
    thresholds = diagnosis_thresholds(c.threshold, c.baseline)
    try:
        written = analyze_trace(c.path, files, thresholds, progress=err)
    except (IngestError, RankSpecError) as exc:
        raise CommandError(str(exc)) from None
    for out in written:
        err.print(f"wrote {out}")


def compare(command: CompareCommand) -> None:
    """Print two runs side by side and write the views asked for."""

    try:
        compare_run_dirs(command.run_a, command.run_b, command.json_file, command.html)
    except RunDirError as exc:
        raise CommandError(str(exc)) from None
