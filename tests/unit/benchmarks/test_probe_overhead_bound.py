"""benchmarks/probe_overhead.py's 95 % upper bound of the mean overhead over its pairs,
against scipy's Student's t (installed with scikit-learn, a test dependency)."""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from probe_overhead import T95_ONE_SIDED, upper_bound  # noqa: E402

stats = pytest.importorskip("scipy.stats")


@pytest.mark.parametrize("values", [[0.4, -0.2, 1.1, 0.3, 0.0, 0.8, -0.5, 0.2, 0.6, 0.1, 0.9],
                                    [1.0, 3.0], [0.1] * 5 + [0.3] * 9])  # fmt: skip
def test_the_bound_is_students_one_sided_95_percent(values: list[float]) -> None:
    n = len(values)
    tabled = max(df for df in T95_ONE_SIDED if df <= n - 1)
    t = stats.t.ppf(0.95, tabled)
    expected = statistics.fmean(values) + t * statistics.stdev(values) / math.sqrt(n)
    assert upper_bound(values) == pytest.approx(expected, abs=2e-3)
    assert (
        upper_bound(values)
        >= statistics.fmean(values)
        + stats.t.ppf(0.95, n - 1) * (statistics.stdev(values) / math.sqrt(n))
        - 2e-3
    )  # never narrower than the exact t
    assert upper_bound(values[:1]) == math.inf
