"""``compare(a, b)``: run B against run A (every ratio is B / A), as ``scalescope compare``
prints and writes it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from scalescope.analyze.compare import RunComparison, compare_runs
from scalescope.api.recording import Recording, load

if TYPE_CHECKING:
    from rich.console import Console


@dataclass(frozen=True, kw_only=True)
class Comparison:
    a: Recording
    """The baseline."""
    b: Recording
    result: RunComparison
    """Facts, throughput, phases, sizes and cross-rank figures side by side (analyze/compare.py)."""

    def print(self, console: Console | None = None) -> None:
        from scalescope.report.formatting import report_console
        from scalescope.report.views.compare import render_comparison

        render_comparison(self.result, console or report_console())

    def write_json(self, path: Path | str) -> Path:
        from scalescope.report.views.compare import comparison_json

        path = Path(path)
        path.write_bytes(comparison_json(self.result))
        return path

    def write_dashboard(self, path: Path | str) -> Path:
        """The two runs side by side on one offline page."""
        from scalescope.report.views.dashboard import render_compare_html

        a, b = self.a, self.b
        page = render_compare_html(a.analysis, a.run, b.analysis, b.run)
        path = Path(path)
        path.write_text(page, encoding="utf-8")
        return path


def compare(a: Recording | Path | str, b: Recording | Path | str) -> Comparison:
    """Run ``b`` against run ``a`` (run directories or Recordings); RunDirError (one line)
    when a path is not a run."""
    rec_a = a if isinstance(a, Recording) else load(a)
    rec_b = b if isinstance(b, Recording) else load(b)
    return Comparison(a=rec_a, b=rec_b, result=compare_runs(rec_a.analysis, rec_b.analysis))
