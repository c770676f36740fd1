"""scalescope: launch, profile, diagnose and tune distributed PyTorch training.

The public API (docs/api.md): ``load(run_dir)`` and ``analyze_traces(path)`` return a
``Recording`` (tables as Arrow, findings, the report's views), ``compare(a, b)`` a
``Comparison``, ``compare_scale(a, b)`` a ``ScaleComparison`` of runs analysed from their
node files (16,384 ranks and more). Names are imported when first used (PEP 562), so
``import scalescope`` imports neither torch nor pandas.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scalescope.api.comparing import Comparison, compare, compare_scale
    from scalescope.api.recording import Recording, analyze_traces, load
    from scalescope.diagnose.findings import Diagnosis, Evidence, Finding
    from scalescope.diagnose.scale_compare import ScaleComparison
    from scalescope.diagnose.thresholds import Thresholds
    from scalescope.events.run import RunDirError
    from scalescope.ingest.result import IngestError

__version__ = "0.1.0"

_WHERE = {
    "load": "scalescope.api.recording",
    "analyze_traces": "scalescope.api.recording",
    "Recording": "scalescope.api.recording",
    "compare": "scalescope.api.comparing",
    "Comparison": "scalescope.api.comparing",
    "compare_scale": "scalescope.api.comparing",
    "ScaleComparison": "scalescope.diagnose.scale_compare",
    "Diagnosis": "scalescope.diagnose.findings",
    "Evidence": "scalescope.diagnose.findings",
    "Finding": "scalescope.diagnose.findings",
    "Thresholds": "scalescope.diagnose.thresholds",
    "RunDirError": "scalescope.events.run",
    "IngestError": "scalescope.ingest.result",
}

__all__ = [
    "Comparison",
    "Diagnosis",
    "Evidence",
    "Finding",
    "IngestError",
    "Recording",
    "RunDirError",
    "ScaleComparison",
    "Thresholds",
    "__version__",
    "analyze_traces",
    "compare",
    "compare_scale",
    "load",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'scalescope' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
