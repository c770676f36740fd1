"""``tune`` speaks global samples/s for any script: the probe counts a step's samples from the
DDP module's inputs when no DataLoader batch is seen (checked against the script's own batch
size, accumulation and steps), speedups are ratios of global samples/s across world sizes,
the global batch note gives its sizes, and a script whose samples cannot be counted (its
weights in no module) is not compared across world sizes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tune_runs import tune

from conftest import SCRIPTS
from scalescope.analyze.steps.steps import analyze_steps
from scalescope.events import load_run

PLAIN = SCRIPTS / "plain_train.py"
STEPS, BATCH, ACCUMULATE, WARMUP = 8, 4, 2, 2
COMMON = ["--warmup-steps", str(WARMUP), "--trial-seconds", "120", "--no-prune", "--confirm", "0"]
RANKS = ["--space", "nproc_per_node=1,2"]
SCRIPT_ARGS = [f"--steps={STEPS}", f"--batch-size={BATCH}", f"--accumulate={ACCUMULATE}"]


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A study of 2 ranks (as given) against 1 rank of a script with no DataLoader."""
    cwd = tmp_path_factory.mktemp("plain")
    done = tune(
        cwd, "-n", "2", *COMMON, *RANKS, "--json", "t.json", "--run-dir", "study", str(PLAIN),
        *SCRIPT_ARGS,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return {"cwd": cwd, "doc": json.loads((cwd / "t.json").read_text()), "out": done.stdout}


@pytest.mark.heavy
@pytest.mark.timeout(600)
def test_samples_are_counted_from_the_ddp_forward(study: dict) -> None:
    trials = study["doc"]["trials"]
    assert {t["config"]["nproc_per_node"] for t in trials} == {1, 2}
    for trial in trials:
        steps = analyze_steps(load_run(study["cwd"] / trial["run_dir"]).events, WARMUP)
        nproc = trial["config"]["nproc_per_node"]
        assert len(steps.ranks) == nproc
        for rank in steps.ranks:
            # the script's truth: BATCH x ACCUMULATE training samples per step; its
            # evaluation forward under no_grad is not counted
            assert rank.num_steps == STEPS - WARMUP
            assert rank.samples == (STEPS - WARMUP) * BATCH * ACCUMULATE
        assert trial["samples_per_step"] == BATCH * ACCUMULATE * nproc
        assert trial["samples_per_s"] == pytest.approx(steps.samples_per_s)


@pytest.mark.heavy
@pytest.mark.timeout(600)
def test_speedup_is_global_samples_per_s_and_the_note_gives_the_batch(study: dict) -> None:
    doc = study["doc"]
    assert doc["unit"] == "samples/s" and "trials by median samples/s" in study["out"]
    base = next(t for t in doc["trials"] if t["baseline"])
    one = next(t for t in doc["trials"] if t["config"]["nproc_per_node"] == 1)
    assert base["config"] == {"nproc_per_node": 2}
    assert one["speedup"] == pytest.approx(one["samples_per_s"] / base["samples_per_s"])
    batch = BATCH * ACCUMULATE
    assert one["changes"] == [f"the global batch: {2 * batch} → {batch} samples per step"]
    assert base["changes"] == []


@pytest.mark.heavy
@pytest.mark.timeout(600)
def test_uncounted_samples_refuse_to_compare_world_sizes(tmp_path: Path) -> None:
    done = tune(
        tmp_path, "-n", "2", *COMMON, *RANKS, "--run-dir", "study", str(PLAIN), "--raw-params",
        *SCRIPT_ARGS,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert "global steps/s, which cannot compare nproc_per_node" in last, done.stderr
    trials = sorted(p.name for p in (tmp_path / "study" / "trials").iterdir())
    assert trials == ["trial-0000"], "only the baseline ran"
    assert (tmp_path / "study" / "trials" / "trial-0000" / "run.json").is_file()
