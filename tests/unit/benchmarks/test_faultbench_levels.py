"""benchmarks/faultbench/levels.py: a run recorded in full, folded as the probe folds it at
``--record summary``: the window steps keep every row, the others hold SUMMARY rows whose
calls and bytes are the full rows' of the same step, and the folded run still loads and
gets its verdict."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks" / "faultbench"))
from levels import summarised_run  # noqa: E402

from scalescope.diagnose.recording import Recording  # noqa: E402
from scalescope.events.files import events_path  # noqa: E402
from scalescope.events.reader import read_event_stream  # noqa: E402
from scalescope.events.schema import Kind  # noqa: E402
from scalescope.probe.windows import windows_from_env  # noqa: E402

RUN = ROOT / "tests" / "data" / "faultbench" / "ddp-forward-clear" / "run"


def per_step(path: Path, kind: Kind) -> tuple[Counter, Counter]:
    rows = read_event_stream(path).table.to_pylist()
    calls, nbytes = Counter(), Counter()
    for r in rows:
        if r["kind"] == kind:
            calls[r["step"]] += 1 if kind == Kind.COLLECTIVE else r["count"]
            nbytes[r["step"]] += r["nbytes"]
    return calls, nbytes


def test_a_full_run_folded_as_at_summary_keeps_its_windows_and_sums(tmp_path) -> None:
    summarised_run(RUN, tmp_path / "run", warmup_steps=4)
    windows = windows_from_env(4)
    full_calls, full_bytes = per_step(events_path(RUN, 0), Kind.COLLECTIVE)
    kept_calls, _ = per_step(events_path(tmp_path / "run", 0), Kind.COLLECTIVE)
    sum_calls, sum_bytes = per_step(events_path(tmp_path / "run", 0), Kind.SUMMARY)
    assert set(kept_calls) == {s for s in full_calls if windows.full(s)}
    assert sum_calls == full_calls and sum_bytes == full_bytes
    assert Recording.load(tmp_path / "run").verdict.top is not None
