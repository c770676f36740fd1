"""``scalescope tune``'s search with real ranks, against the truth its script is built with
(tune_runs.py): every step sleeps 30 ms + ``--sleep-ms`` + ``PAUSE_MS``, so the fastest
points of the space are the two with neither sleep (``--steps`` only changes how long a
trial runs), every other point sleeps at least 30 ms more per step, and the baseline's
speed follows from the fastest point's. Resume and the exhaustive grid:
test_tune_failures.py (nothing there compares timings).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tune_runs import (
    BASE_MS,
    COMMON,
    NO_CONFIRM,
    SCRIPT_ARGS,
    SPACE,
    SPACE_SIZE,
    sleep_ms,
    trials_of,
    tune,
)

TOLERANCE = 0.1
"""Of the baseline's samples/s against the speed its sleeps give it."""


@pytest.mark.timeout(900)
def test_search_finds_the_fastest_point_in_a_third_of_its_trials(tmp_path: Path) -> None:
    budget = SPACE_SIZE // 3
    done = tune(tmp_path, *COMMON, *NO_CONFIRM, *SPACE, "--trials", str(budget), "--json",
                "t.json", *SCRIPT_ARGS)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    trials = trials_of(tmp_path / "t.json")
    assert len(trials) <= budget
    found = max((t for t in trials if t["status"] == "ok"), key=lambda t: t["samples_per_s"])
    assert sleep_ms(found) == BASE_MS, [(t["config"], t["samples_per_s"]) for t in trials]
    # The table's speedup is the trial's samples/s over the baseline's, as recorded ...
    base = next(t for t in trials if t["baseline"])
    assert found["speedup"] == pytest.approx(found["samples_per_s"] / base["samples_per_s"])
    # ... and true: the baseline sleeps longer per step by a known time, the rest is the same.
    samples_per_step = found["samples_per_step"]
    other_ms = 1e3 * samples_per_step / found["samples_per_s"] - BASE_MS
    expected = samples_per_step / ((sleep_ms(base) + other_ms) / 1e3)
    print(f"baseline: {base['samples_per_s']:.1f} samples/s measured, {expected:.1f} by its "
          f"sleeps; found {found['config']} at {found['samples_per_s']:.1f}")  # fmt: skip
    assert base["samples_per_s"] == pytest.approx(expected, rel=TOLERANCE)
    assert "reuse it with:" in done.stdout and "PAUSE_MS=" in done.stdout
