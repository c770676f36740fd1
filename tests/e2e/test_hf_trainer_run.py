"""A real 2-rank run of an unmodified Hugging Face Trainer (GPT-2 built from a config, gloo on
the CPU, evaluation every 20 steps on every rank): a step's phases add to at most the step;
evaluation (the Trainer calls ``ddp.module`` directly) is the phase ``eval``, never training
forwards or samples; samples match the script's own clock; the advice fits a transformer.
Structure, and counts against the script's own. samples/s against the script's clock (within
5 %: a timing, off by more at load average 8) is checked in ``make bench``."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from analysed import analysed  # noqa: E402
from test_rank_only_work import own_clock, phase_overlap_ns

from conftest import SCRIPTS, run_then_report
from scalescope.diagnose import DEFAULT_THRESHOLDS
from scalescope.diagnose.engine import diagnosis_input
from scalescope.diagnose.rules_compute import ComputeRule
from scalescope.events import PHASES, Kind, load_run

HF_TRAINER = SCRIPTS / "hf_trainer_train.py"
STEPS, EVAL_EVERY, BATCH = 60, 20, 8
EVAL_BATCHES = 4
"""The script's eval set: 64 sequences, 32 per rank, 4 batches of 8."""


def phase_names(run_dir: Path, rank: int) -> tuple[np.ndarray, np.ndarray]:
    ev = load_run(run_dir).events
    phases = ev.select((ev.rank == rank) & (ev.kind == int(Kind.PHASE)))
    return phases.step, np.array(phases.strings("name"))


def run_hf_trainer(tmp_path: Path) -> tuple:
    pytest.importorskip("transformers", reason="transformers and accelerate are dev extras")
    pytest.importorskip("accelerate", reason="transformers and accelerate are dev extras")
    return run_then_report(
        2, HF_TRAINER, "--steps", STEPS, "--eval-every", EVAL_EVERY, "--batch-size", BATCH,
        "--out", tmp_path / "hf_out", cwd=tmp_path,
    )  # fmt: skip


def test_hf_trainer_phases_eval_samples_and_advice_hold(tmp_path: Path) -> None:
    proc, doc = run_hf_trainer(tmp_path)
    run_dir = tmp_path / "run"
    worst_sum, worst_overlap = phase_overlap_ns(run_dir)
    assert worst_sum <= 0 and worst_overlap <= 0, "a step's phases add to at most the step"

    for rank in (0, 1):  # the eval after optimizer step k lands in step k
        steps, names = phase_names(run_dir, rank)
        evals = Counter(steps[names == "eval"].tolist())
        assert evals == dict.fromkeys((20, 40, 60), 2 * EVAL_BATCHES), "forwards and batches"
        forwards = np.bincount(steps[names == "forward"], minlength=STEPS)
        assert forwards[1:STEPS].tolist() == [1] * (STEPS - 1), "one training forward a step"

    clock = own_clock(proc.stdout)
    assert set(clock) == {0, 1}, proc.stdout[-2000:]
    for rank_doc in doc["steps"]["ranks"]:
        rank = rank_doc["rank"]
        assert rank_doc["samples"] == clock[rank][0] == (STEPS - 1) * BATCH, "training only"
        assert rank_doc["samples_per_s"] > 0
        shares = {p["phase"]: p["share_pct"] for p in rank_doc["phases"]}
        assert sum(shares[p] for p in PHASES if p in shares) <= 100 + 1e-6

    findings = doc["diagnosis"]["findings"]
    assert all(f["share_pct"] is None or f["share_pct"] <= 100 for f in findings), findings
    assert "channels_last" not in json.dumps(findings)
    run = load_run(run_dir)
    assert "convolution" not in run.ranks[0].layer_shares, "GPT-2's Conv1D is a linear layer"
    any_share = dataclasses.replace(DEFAULT_THRESHOLDS, compute_share_pct=0.01)
    compute = ComputeRule().evaluate(diagnosis_input(run, analysed(run), any_share))
    assert compute is not None and compute.share_pct <= 100
    text = " ".join(compute.remedies)
    assert "channels" not in text and "convolution" not in text, text


@pytest.mark.heavy
def test_hf_trainer_samples_per_s_match_its_own_clock(tmp_path: Path) -> None:
    proc, doc = run_hf_trainer(tmp_path)
    clock = own_clock(proc.stdout)
    for rank_doc in doc["steps"]["ranks"]:
        assert rank_doc["samples_per_s"] == pytest.approx(clock[rank_doc["rank"]][1], rel=0.05)
