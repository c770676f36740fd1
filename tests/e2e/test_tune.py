"""``scalescope tune`` with real ranks: the search against an exhaustive sweep of the same
space, and resume (test_tune_failures.py: a crashing trial, confirmation, Ctrl-C, bad input).

The space (tune_runs.py) has one clearly best point up to an irrelevant knob. The sweep
(``--sampler grid``) runs in two parts through ``--resume``, so the same study checks that
resume continues where it stopped.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from real_runs import skip_or_fail
from tune_runs import COMMON, NO_CONFIRM, SCRIPT_ARGS, SPACE, SPACE_SIZE, trials_of, tune

TOLERANCE = 0.05


def key(trial: dict) -> tuple:
    return tuple(sorted(trial["config"].items()))


def equal_pairs_gap(measured: dict[tuple, float]) -> float:
    """The largest relative gap between two points that differ only in ``--steps`` (the
    same speed by construction): how noisy this machine measured the sweep."""
    groups: dict[tuple, list[float]] = {}
    for point, value in measured.items():
        groups.setdefault(tuple(kv for kv in point if kv[0] != "--steps"), []).append(value)
    return max((max(v) - min(v)) / max(v) for v in groups.values())


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The exhaustive sweep, stopped after 5 trials and resumed to the end."""
    cwd = tmp_path_factory.mktemp("sweep")
    grid = [*COMMON, *SPACE, "--sampler", "grid", "--run-dir", "study"]
    first = tune(cwd, *grid, *NO_CONFIRM, "--trials", "5", "--json", "first.json", *SCRIPT_ARGS)
    assert first.returncode == 0, first.stderr[-3000:]
    again = [*grid, *NO_CONFIRM, "--resume", "--trials", "20", "--json", "all.json"]
    second = tune(cwd, *again, *SCRIPT_ARGS)
    assert second.returncode == 0, second.stderr[-3000:]
    return {
        "first": trials_of(cwd / "first.json"),
        "all": trials_of(cwd / "all.json"),
        "doc": json.loads((cwd / "all.json").read_text()),
        "first_doc": json.loads((cwd / "first.json").read_text()),
    }


@pytest.mark.timeout(1500)
def test_resume_continues_the_study(sweep: dict) -> None:
    first = {t["number"] for t in sweep["first"]}
    every = {t["number"] for t in sweep["all"]}
    assert len(first) == 5 and first < every
    baselines = [t for t in sweep["all"] if t["baseline"]]
    assert len(baselines) == 1, "resume ran the baseline again"
    points = {key(t) for t in sweep["all"]}
    assert len(points) == SPACE_SIZE == len(sweep["all"]), "each point measured exactly once"
    assert sweep["doc"]["stopped"] == "exhausted"
    assert sweep["first_doc"]["confirmations"] == [], "--confirm 0 ran confirmation runs"


@pytest.mark.timeout(1500)
def test_search_finds_the_sweeps_best_in_a_third_of_its_trials(sweep: dict, tmp_path: Path) -> None:
    measured = {key(t): t["samples_per_s"] for t in sweep["all"] if t["status"] == "ok"}
    assert len(measured) == SPACE_SIZE
    sweep_best = max(measured.values())
    gap = equal_pairs_gap(measured)
    if gap > TOLERANCE:
        skip_or_fail(f"too noisy here: equal configurations measured {100 * gap:.0f}% apart")
    budget = SPACE_SIZE // 3
    done = tune(tmp_path, *COMMON, *NO_CONFIRM, *SPACE, "--trials", str(budget), "--json",
                "t.json", *SCRIPT_ARGS)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    trials = trials_of(tmp_path / "t.json")
    assert len(trials) <= budget
    found = max((t for t in trials if t["status"] == "ok"), key=lambda t: t["samples_per_s"])
    assert measured[key(found)] >= (1 - TOLERANCE) * sweep_best, (found, measured)
    # The table's speedup is the trial's samples/s over the baseline's, as recorded.
    base = next(t for t in trials if t["baseline"])
    assert found["speedup"] == pytest.approx(found["samples_per_s"] / base["samples_per_s"])
    assert "reuse it with:" in done.stdout and "PAUSE_MS=" in done.stdout
