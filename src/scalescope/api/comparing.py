"""``compare(a, b)``: run B against run A (every ratio is B / A), as ``scalescope compare``
prints and writes it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from scalescope.analyze.runs.compare import RunComparison, compare_runs
from scalescope.api.recording import Recording, load
from scalescope.events.run import RunDirError

if TYPE_CHECKING:
    from rich.console import Console

    from scalescope.diagnose.scale_compare import ScaleComparison
    from scalescope.diagnose.scale_sides import ReadRun


@dataclass(frozen=True, kw_only=True)
class Comparison:
    a: Recording
    """The baseline."""
    b: Recording
    result: RunComparison
    """Facts, throughput, phases, sizes and cross-rank figures side by side
    (analyze/runs/compare.py)."""

    def print(self, console: Console | None = None) -> None:
        from scalescope.report.formatting import report_console
        from scalescope.report.media.terminal import render_document
        from scalescope.report.renderers import render

        render_document(render(self.result, "terminal"), console or report_console())

    def write_json(self, path: Path | str) -> Path:
        from scalescope.report.renderers import write

        return write(self.result, "json", Path(path))

    def write_dashboard(self, path: Path | str) -> Path:
        """The two runs side by side on one offline page."""
        from scalescope.report.renderers import write
        from scalescope.report.subjects import ComparedRuns

        a, b = self.a, self.b
        runs = ComparedRuns(comparison=self.result, a=a.analysis, b=b.analysis)
        return write(runs, "html", Path(path))


def compare(a: Recording | Path | str, b: Recording | Path | str) -> Comparison:
    """Run ``b`` against run ``a`` (run directories or Recordings); RunDirError (one line)
    when a path is not a run."""
    if not isinstance(a, Recording) and not isinstance(b, Recording) and at_scale(a, b):
        raise RunDirError(f"{a} or {b} is analysed from its node files: use compare_scale(a, b)")
    rec_a = a if isinstance(a, Recording) else load(a)
    rec_b = b if isinstance(b, Recording) else load(b)
    return Comparison(a=rec_a, b=rec_b, result=compare_runs(rec_a.analysis, rec_b.analysis))


def at_scale(a: Path | str, b: Path | str) -> bool:
    """Whether either run is analysed from its node files (then ``compare_scale``)."""
    from scalescope.analyze.scale.summary import from_node_files

    return from_node_files(Path(a)) or from_node_files(Path(b))


def read_run(run_dir: Path | str) -> ReadRun:
    """A run as ``compare_scale`` reads it: from its node files where ``report`` would be,
    else from its rank files."""
    from scalescope.analyze.scale.summary import from_node_files
    from scalescope.diagnose.scale_recording import ScaleRecording
    from scalescope.diagnose.scale_sides import node_file_side, rank_file_side

    if from_node_files(Path(run_dir)):
        return node_file_side(ScaleRecording(run_dir))
    return rank_file_side(load(run_dir))


def compare_scale(a: Path | str, b: Path | str) -> ScaleComparison:
    """Run ``b`` against run ``a`` where either is analysed from its node files
    (diagnose/scale_compare.py); RunDirError or NodeFileError (one line) on a bad run."""
    from scalescope.diagnose.scale_compare import compare_scale as compared

    return compared(read_run(a), read_run(b))
