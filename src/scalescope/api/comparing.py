"""``compare(a, b)``: run B against run A (every ratio is B / A), as ``scalescope compare``
prints and writes it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from scalescope.analyze.runs.compare import RunComparison, compare_runs
from scalescope.api.recording import Recording, load

if TYPE_CHECKING:
    from rich.console import Console


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
    rec_a = a if isinstance(a, Recording) else load(a)
    rec_b = b if isinstance(b, Recording) else load(b)
    return Comparison(a=rec_a, b=rec_b, result=compare_runs(rec_a.analysis, rec_b.analysis))
