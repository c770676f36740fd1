"""``scalescope tune`` when things go wrong, with real ranks: a crashing trial (and the
confirmation runs of that study), Ctrl-C, and bad input refused before any rank starts.
Nothing here compares timings."""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tune_runs import COMMON, NO_CONFIRM, SPACE, TUNE_TRAIN, trials_of, tune

from conftest import cli_env, scalescope_in_process


@pytest.fixture(scope="module")
def crashing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A grid of 3 points in which one configuration crashes, stopped after 2 trials
    (``--confirm 0``) and resumed to the end, then the baseline and the best run once more
    (``--confirm 1 --confirm-rounds 1``)."""
    cwd = tmp_path_factory.mktemp("crashing")
    grid = [*COMMON, "--sampler", "grid", "--space", "--sleep-ms=0,30,crash", "--run-dir",
            "study"]  # fmt: skip
    first = tune(cwd, *grid, *NO_CONFIRM, "--trials", "2", "--json", "first.json",
                 str(TUNE_TRAIN), "--sleep-ms=30")  # fmt: skip
    assert first.returncode == 0, first.stderr[-3000:]
    second = tune(
        cwd, *grid, "--resume", "--confirm", "1", "--confirm-rounds", "1", "--trials", "4",
        "--json", "t.json", str(TUNE_TRAIN), "--sleep-ms=30",
    )  # fmt: skip
    assert second.returncode == 0, second.stderr[-3000:]
    return cwd


@pytest.mark.heavy
@pytest.mark.timeout(600)
def test_resume_continues_the_study(crashing: Path) -> None:
    first = {t["number"] for t in trials_of(crashing / "first.json")}
    every = trials_of(crashing / "t.json")
    assert len(first) == 2 and first < {t["number"] for t in every}
    assert len([t for t in every if t["baseline"]]) == 1, "resume ran the baseline again"
    points = {tuple(sorted(t["config"].items())) for t in every if not t["baseline"]}
    assert len(points) == 2 == len(every) - 1, "each point measured exactly once"
    assert json.loads((crashing / "first.json").read_text())["confirmations"] == [], (
        "--confirm 0 ran confirmation runs"
    )


@pytest.mark.heavy
@pytest.mark.timeout(600)
def test_crashing_trial_is_recorded_and_the_study_finishes(crashing: Path) -> None:
    trials = trials_of(crashing / "t.json")
    failed = [t for t in trials if t["config"].get("--sleep-ms") == "crash"]
    assert len(failed) == 1 and failed[0]["status"] == "failed"
    assert "deliberate crash" in failed[0]["error"]
    assert any(t["status"] == "ok" for t in trials)
    assert json.loads((crashing / "t.json").read_text())["stopped"] == "exhausted"


@pytest.mark.heavy
@pytest.mark.timeout(600)
def test_confirmation_reruns_the_baseline_and_the_best(crashing: Path) -> None:
    doc = json.loads((crashing / "t.json").read_text())
    trials = {t["number"]: t for t in doc["trials"]}
    base = next(t for t in trials.values() if t["baseline"])
    measured = [t for t in trials.values() if not t["baseline"] and t["status"] == "ok"]
    top = max(measured, key=lambda t: t["samples_per_s"])
    runs = doc["confirmations"]
    assert [(r["trial"], r["round"]) for r in runs] == [(base["number"], 1), (top["number"], 1)]
    for run in runs:
        assert run["status"] == "ok" and (crashing / run["run_dir"] / "run.json").is_file()
        trial = trials[run["trial"]]
        values = [trial["samples_per_s"], run["samples_per_s"]]
        assert trial["measurements"] == values
        assert trial["median"] == pytest.approx(statistics.median(values))
    medians = {n: t["median"] for n, t in trials.items() if t["median"] is not None}
    assert doc["best_trial"] == max(medians, key=medians.get)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--space", "fusion=1,2"], "unknown knob 'fusion'"),
        (["--space", "bucket_cap_mb=5"], "nothing to search"),
        (["--space", "bucket_cap_mb=5,"], "empty value"),
        (["--space", "bind_to=[red]"], "'[red]' is not one of"),
        (["--space", "workers=0,2"], "never calls scalescope.tune.knobs(), so it cannot"),
        (["--confirm", "-1"], "--confirm must be 0 (off) or more, got -1"),
        (["--confirm-rounds", "0"], "--confirm-rounds must be at least 1, got 0"),
        (["--fsdp"], "--fsdp is an option of --bench: a script shards its own model"),
        (["--space", "fsdp_prefetch=0,2"], "'0' is less than 1"),
    ],
)
def test_bad_space_is_a_one_line_error(tmp_path: Path, args: list[str], message: str) -> None:
    done = scalescope_in_process("tune", "-n", "2", *args, TUNE_TRAIN, cwd=tmp_path)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], done.stderr
    assert not (tmp_path / "scalescope_runs").exists()


@pytest.mark.timeout(600)
def test_ctrl_c_ends_the_study_and_prints_the_finished_trials(tmp_path: Path) -> None:
    cmd = [
        sys.executable, "-m", "scalescope.cli", "tune", *COMMON, *NO_CONFIRM, *SPACE,
        "--trials", "6", "--run-dir", "study", "--json", "t.json", str(TUNE_TRAIN), "--steps=200",
    ]  # fmt: skip
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
    )  # fmt: skip
    second = tmp_path / "study" / "trials" / "trial-0001" / "run.json"
    deadline = time.monotonic() + 400
    while not second.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.5)
    assert second.exists(), "the second trial never started"
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal sends
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-3000:]
    assert "study: interrupted" in out and "baseline (as given)" in out
    trials = {t["number"]: t for t in trials_of(tmp_path / "t.json")}
    assert trials[0]["status"] == "ok" and trials[1]["status"] == "interrupted"
