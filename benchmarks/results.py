"""One figure of a benchmark, as a JSON line for `make bench` (benchmarks/run_all.py).

A script calls ``record(...)`` at its end; when ``SCALESCOPE_BENCH_RESULTS`` names a file
(run_all.py sets it) the figure is appended to it, else nothing happens, so the scripts run
standalone as before. A test under benchmarks/accuracy/ can call it the same way (with
benchmarks/ on sys.path: run_all.py puts it on PYTHONPATH).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path

ENV = "SCALESCOPE_BENCH_RESULTS"


@dataclass(frozen=True)
class Result:
    figure: str
    """What is measured, e.g. ``images/s with the probe / without (resnet18, 2 ranks)``."""
    value: float
    """NaN when nothing was measured (a skip)."""
    unit: str
    target: str
    """As the script's docstring states it, e.g. ``>= 0.99``; empty when it states none."""
    met: bool | None
    """None: no target, or not measured (``detail`` says why)."""
    detail: str = ""
    source: str = ""
    """The script (or ``accuracy``) that recorded it; run_all.py fills it in."""

    def to_json(self) -> str:
        value = None if math.isnan(self.value) else self.value
        return json.dumps(asdict(self) | {"value": value}, ensure_ascii=False)

    @classmethod
    def from_json(cls, line: str, source: str = "") -> Result:
        doc = json.loads(line)
        value = math.nan if doc.get("value") is None else float(doc["value"])
        met = doc.get("met")
        return cls(
            figure=str(doc["figure"]), value=value, unit=str(doc.get("unit", "")),
            target=str(doc.get("target", "")), met=None if met is None else bool(met),
            detail=str(doc.get("detail", "")), source=source or str(doc.get("source", "")),
        )  # fmt: skip


def results_file() -> Path | None:
    name = os.environ.get(ENV)
    return Path(name) if name else None


def record(
    figure: str, value: float, unit: str, target: str, met: bool | None, detail: str = ""
) -> Result:
    """Append one figure to ``$SCALESCOPE_BENCH_RESULTS`` when it is set; returns it. ``met``
    may be numpy's bool (a comparison of its floats): it is written as JSON's."""
    result = Result(figure, float(value), unit, target, None if met is None else bool(met), detail)
    path = results_file()
    if path is not None:
        with open(path, "a", encoding="utf-8") as f:
            f.write(result.to_json() + "\n")
    return result


def skipped(figure: str, unit: str, target: str, reason: str) -> Result:
    """A figure that could not be measured here (missing root, package, ...)."""
    return record(figure, math.nan, unit, target, None, f"skipped: {reason}")


def read_results(path: Path, source: str = "") -> list[Result]:
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    return [Result.from_json(line, source) for line in lines if line.strip()]
