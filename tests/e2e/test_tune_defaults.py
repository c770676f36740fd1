"""``scalescope tune`` as a user types it: pruning on (the default), trials stopped at
--trial-seconds, a trial that never steps killed with its reason, --budget, and
``--bench MODEL`` (a small model a user would pick to keep a trial short) with its input
errors. Every other tune test passes ``--no-prune`` and a generous --trial-seconds.

The script (scripts/tune_endless.py) never ends by itself, so every trial that is not pruned
runs until tune stops it. With ``--sampler grid --seed 3`` the grid's order is: the baseline
(--sleep-ms=0), 1, a repeat of the baseline (not run, but a completed trial for optuna), then
100 (4x slower per step: pruned, 3 trials having completed) and hang (no step: killed). The
order depends only on the seed. A trial gets 25 s: on a loaded 2-core machine the ranks'
start-up alone took over 12 s.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tune_runs import tune

from conftest import SCRIPTS, scalescope_in_process

ENDLESS = SCRIPTS / "tune_endless.py"
TRIAL_S = 25.0
KILL_GRACE_S = 10.0
"""tune.trial.KILL_GRACE_S: how long ranks get after SIGTERM."""
BUDGET_MIN = 0.01
"""--budget: no trial starts after 0.6 s, so the study stops after its baseline however fast
the machine runs it (ranks alone take seconds to start). At 0.1 min an idle VM ran the
baseline in under 6 s and started a second trial (benchmarks/flake_rate.py, 2026-11-25)."""
BENCH_STEPS = 8
"""--trial-steps of the ``--bench resnet18`` study: 30 took ~55 s of CPU on a loaded machine
(each step all-reduces resnet18's 45 MB of gradients), 8 ~38 s; the test checks structure."""


@pytest.fixture(scope="module")
def endless(tmp_path_factory: pytest.TempPathFactory) -> dict:
    cwd = tmp_path_factory.mktemp("endless")
    done = tune(
        cwd, "-n", "2", "--trial-seconds", f"{TRIAL_S:g}", "--sampler", "grid", "--seed", "3",
        "--confirm", "0", "--space", "--sleep-ms=0,1,100,hang", "--json", "t.json",
        "--run-dir", "study", str(ENDLESS), "--sleep-ms=0", timeout=400,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads((cwd / "t.json").read_text())
    by_sleep = {str(t["config"].get("--sleep-ms")): t for t in doc["trials"] if t["config"]}
    base = next(t for t in doc["trials"] if t["baseline"])
    return {"doc": doc, "by_sleep": by_sleep | {"0": base}, "stderr": done.stderr, "cwd": cwd}


@pytest.mark.heavy
@pytest.mark.timeout(600)
def test_a_slow_trial_is_pruned_by_default(endless: dict) -> None:
    trials = endless["by_sleep"]
    slow = trials["100"]
    earlier_ok = [
        t for t in trials.values() if t["number"] < slow["number"] and t["status"] == "ok"
    ]
    assert len(earlier_ok) >= 2, f"the grid's order changed: {sorted(trials)}"
    assert slow["status"] == "pruned" and not slow["stopped_at_budget"], slow
    assert 0 < slow["samples_per_s"] < min(t["samples_per_s"] for t in earlier_ok)


@pytest.mark.heavy
@pytest.mark.timeout(600)
def test_trials_stop_at_trial_seconds(endless: dict) -> None:
    for sleep in ("0", "1"):
        trial = endless["by_sleep"][sleep]
        assert trial["status"] == "ok" and trial["stopped_at_budget"], trial
        assert trial["samples_per_s"] > 0
        assert TRIAL_S <= trial["seconds"] < TRIAL_S + KILL_GRACE_S + 5, trial
        run = json.loads((endless["cwd"] / trial["run_dir"] / "run.json").read_text())
        ended = {r["status"] for r in run["ranks"].values()}
        assert ended == {"interrupted"} and len(run["ranks"]) == 2, run["ranks"]


@pytest.mark.heavy
@pytest.mark.timeout(600)
def test_a_trial_that_never_steps_is_killed_with_its_reason(endless: dict) -> None:
    hung = endless["by_sleep"]["hang"]
    assert hung["status"] == "failed"
    assert hung["error"] == f"no step measured within its {TRIAL_S:g} s budget: killed (hung?)"
    assert TRIAL_S <= hung["seconds"] < TRIAL_S + KILL_GRACE_S + 5
    assert "killed (hung?)" in endless["stderr"]
    assert endless["doc"]["stopped"] == "exhausted"


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The bench workload of resnet18 on small images; --budget ends the study after the
    baseline (which alone takes longer than the budget, ``BUDGET_MIN``), before --trials 3."""
    cwd = tmp_path_factory.mktemp("bench")
    done = tune(
        cwd, "--bench", "resnet18", "-n", "2", "--batch-size", "8", "--image-size", "32",
        "--trial-steps", f"{BENCH_STEPS}", "--budget", f"{BUDGET_MIN:g}", "--trials", "3",
        "--confirm", "0",
        "--json", "t.json", "--run-dir", "study", timeout=400,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((cwd / "t.json").read_text()) | {"cwd": cwd}


@pytest.mark.heavy
@pytest.mark.timeout(600)
def test_bench_model_is_tuned_until_the_budget(bench: dict) -> None:
    assert bench["stopped"] == "budget"
    (trial,) = bench["trials"]
    assert trial["baseline"] and trial["status"] == "ok", trial
    assert trial["seconds"] >= 60 * BUDGET_MIN
    assert not trial["stopped_at_budget"], f"{BENCH_STEPS} steps of resnet18 took a minute"
    assert trial["samples_per_s"] > 0
    run = json.loads((bench["cwd"] / trial["run_dir"] / "run.json").read_text())
    assert run["status"] == "completed"
    assert run["workload"] == "resnet18" and run["options"]["steps"] == BENCH_STEPS


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--bench", "nosuch"], "unknown model 'nosuch'; valid models:"),
        (["--bench", "resnet18", "train.py"], "--bench takes no script"),
        (["--bench", "resnet18", "--budget", "0"], "--budget must be positive minutes, got 0"),
        (["--bench", "resnet18", "--trial-seconds", "-1"], "--trial-seconds must be positive"),
        ([], "give a training script or --bench MODEL"),
    ],
)
def test_bench_input_errors_are_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    done = scalescope_in_process("tune", "-n", "2", *args, cwd=tmp_path)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], done.stderr
    assert not any(tmp_path.iterdir()), "a refused study left files"


@pytest.mark.parametrize(
    ("option", "value"), [("--batch-size", "0"), ("--image-size", "4"), ("--trial-steps", "1")]
)
def test_bench_sizes_below_their_minimum_are_refused(
    tmp_path: Path, option: str, value: str
) -> None:
    done = scalescope_in_process(
        "tune", "-n", "2", "--bench", "resnet18", option, value, cwd=tmp_path
    )
    assert done.returncode == 2 and option in done.stderr, done.stderr
    assert not any(tmp_path.iterdir())
