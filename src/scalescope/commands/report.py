"""`scalescope report`, `compare` and `analyze`: load or ingest a run, analyse and diagnose it,
print it and write the views asked for (JSON, HTML dashboard, Chrome timeline). A scale study
or a suite given to `report` prints its table again."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from scalescope.api.recording import load
from scalescope.api.reporting import ReportFiles, report_study
from scalescope.commands.common import CommandError, err
from scalescope.commands.options.reading import AnalyzeCommand, CompareCommand, ReportCommand
from scalescope.diagnose.thresholds import DEFAULT_THRESHOLDS, Thresholds
from scalescope.events.run import RunDirError
from scalescope.report.formatting import report_console

if TYPE_CHECKING:
    from scalescope.ingest import IngestResult


def compare_run_dirs(a_dir: Path, b_dir: Path, json_file: Path | None, html: Path | None) -> None:
    from scalescope.api.comparing import compare

    comparison = compare(a_dir, b_dir)
    comparison.print()
    if json_file is not None:
        comparison.write_json(json_file)
    if html is not None:
        comparison.write_dashboard(html)


def ingest_with_progress(path: Path, console: Console | None) -> IngestResult:
    """Ingest ``path`` with a bar of the trace bytes read and the time left on ``console``
    (hidden off a terminal)."""
    from scalescope.ingest import ingest
    from scalescope.ingest.detect import trace_candidates
    from scalescope.ingest.jsonstream import reading_progress
    from scalescope.report.renderers import progress

    if console is None:
        return ingest(path)
    found = trace_candidates(path) if path.is_dir() else [path] if path.is_file() else []
    total = sum(p.stat().st_size for p in found)
    with (
        progress("bytes")(console, f"reading {path}") as advance,
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
    from scalescope.api.recording import from_ingest

    recording = from_ingest(ingest_with_progress(Path(path), progress), thresholds)
    recording.print_report()
    return recording.write(files)


def check_ranks(ranks: str | None, timeline: Path | None) -> None:
    """A ``--ranks`` value that cannot be read, or one without ``--timeline``, is a one-line
    error before anything is analysed."""
    from scalescope.report.rank_spec import RankSpecError, parse_rank_spec

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
    from scalescope.report.rank_spec import RankSpecError

    c = command
    check_ranks(c.ranks, c.timeline)
    if (c.run_dir / SCALE_STUDY_FILE).is_file():
        report_study_dir(c.run_dir, c.json_file, c.html, c.timeline)
        return
    if c.run_dir.is_file() or (c.run_dir / SUITE_FILE).is_file():
        report_suite(c.run_dir, c.json_file or c.html or c.timeline)
        return
    if report_from_node_files(c):
        return
    files = ReportFiles(json=c.json_file, html=c.html, timeline=c.timeline, steps=c.steps,
                        ranks=c.ranks)  # fmt: skip
    thresholds = diagnosis_thresholds(c.threshold, c.baseline)
    try:
        recording = load(c.run_dir, thresholds)
        recording.print_report()
        written = recording.write(files)
        if c.rank is not None:
            print_rank(c.run_dir, c.rank)
    except (RunDirError, RankSpecError) as exc:
        raise CommandError(str(exc)) from None
    for path in written:
        err.print(f"wrote {path}")


def print_rank(run_dir: Path, rank: int) -> None:
    from scalescope.diagnose.scale_recording import rank_detail

    for line in rank_detail(run_dir, rank).lines:
        report_console().print(line, highlight=False, markup=False)


NODE_FILES_TIMELINE = (
    "a timeline draws each rank's calls, which the node files do not keep (they hold each "
    "node's sums): --rank N prints a kept rank's detail from its rank file"
)
NODE_FILES_THRESHOLDS = (
    "its verdict tests nodes against their peers and sets no diagnosis threshold (--threshold) "
    "nor a FLOP/s expectation (--baseline)"
)


def node_file_options(c: ReportCommand) -> None:
    """The options a run analysed from its node files cannot take, refused in one line."""
    if c.timeline:
        raise CommandError(f"{c.run_dir} is analysed from node files: no --timeline: "
                           f"{NODE_FILES_TIMELINE}")  # fmt: skip
    if c.threshold or c.baseline:
        raise CommandError(f"{c.run_dir} is analysed from node files: "
                           f"{NODE_FILES_THRESHOLDS}")  # fmt: skip


def report_from_node_files(c: ReportCommand) -> bool:
    """A run analysed from its node files (analyze/scale/): its report, its JSON, its
    dashboard and the rank asked for; False for any other run."""
    from scalescope.analyze.scale.node_grid import node_grid
    from scalescope.analyze.scale.summary import from_node_files
    from scalescope.diagnose.scale_recording import ScaleRecording
    from scalescope.events.node_file import NodeFileError
    from scalescope.report.renderers import render, write
    from scalescope.report.subjects import ScaleReport

    try:
        if not from_node_files(c.run_dir):
            return False
        node_file_options(c)
        recording = ScaleRecording(c.run_dir)
        a = recording.analysis
        grid = node_grid(a) if c.html is not None else None
        subject = ScaleReport(analysis=a, verdict=recording.verdict, grid=grid)
        report_console().print(render(subject, "text"), highlight=False, markup=False)
        if c.rank is not None:
            print_rank(c.run_dir, c.rank)
    except (RunDirError, NodeFileError) as exc:
        raise CommandError(str(exc)) from None
    if c.json_file is not None:
        c.json_file.write_bytes(render(subject, "json"))
        err.print(f"wrote {c.json_file}")
    if c.html is not None:
        err.print(f"wrote {write(subject, 'html', c.html)}")
    return True


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
    from scalescope.report.formatting import suite_console
    from scalescope.report.media.terminal import render_document
    from scalescope.report.renderers import render

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
    from scalescope.report.rank_spec import RankSpecError

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
    """Print two runs side by side and write the views asked for; where either is analysed
    from its node files, the comparison at scale (``compare_at_scale``)."""
    from scalescope.api.comparing import at_scale
    from scalescope.events.node_file import NodeFileError

    c = command
    try:
        if at_scale(c.run_a, c.run_b):
            compare_at_scale(c.run_a, c.run_b, c.json_file, c.html)
        else:
            compare_run_dirs(c.run_a, c.run_b, c.json_file, c.html)
    except (RunDirError, NodeFileError) as exc:
        raise CommandError(str(exc)) from None


def compare_at_scale(a_dir: Path, b_dir: Path, json_file: Path | None, html: Path | None) -> None:
    """Two runs, either analysed from its node files: the step, the verdicts, the late nodes,
    ranks and links and the node what-if, B against A (diagnose/scale_compare.py)."""
    from scalescope.api.comparing import compare_scale
    from scalescope.report.renderers import render, write

    comparison = compare_scale(a_dir, b_dir)
    report_console().print(render(comparison, "text"), highlight=False, markup=False)
    for output, path in (("json", json_file), ("html", html)):
        if path is not None:
            err.print(f"wrote {write(comparison, output, path)}")
