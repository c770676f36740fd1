"""One number per cause: a straggler's, a slow node's and exposed communication's saving is
the what-if's gain with that cause fixed, and a load imbalance beside a slow rank or node is
folded into it. On a recorded straggler run and on a synthetic run with a planted slow node
(benchmarks/synthetic_run.py), whose truth names the node."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest
from recorded_runs import RUNS

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))

from scalescope.analyze import analyze_run  # noqa: E402
from scalescope.diagnose.engine import NOT_REPLAYED, diagnose_run, replayed_savings  # noqa: E402
from scalescope.diagnose.findings import Finding  # noqa: E402
from scalescope.events import load_run  # noqa: E402
from synthetic_run import write_run  # noqa: E402


def by_code(findings, code: str) -> Finding:
    return next(f for f in findings if f.code == code)


def test_the_stragglers_saving_is_the_replayed_gain_of_fixing_it():
    run = load_run(RUNS / "straggler_forward_2" / "run")
    analysis = analyze_run(run)
    straggler = by_code(diagnose_run(run, analysis).findings, "STRAGGLER")
    fix = next(f for f in analysis.whatif.fixes if f.cause == f"rank:{straggler.rank}")
    assert straggler.saved_ms_per_step == pytest.approx(fix.gain_ms)
    assert straggler.basis == "replayed without it: began at step 12: as in steps 3-11"


def test_exposed_communication_saves_what_hiding_the_transfers_gains():
    run = load_run(RUNS / "comm_bound" / "run")
    analysis = analyze_run(run)
    comm = next(f for f in diagnose_run(run, analysis).findings if f.code.startswith("COMM_"))
    hidden = next(f for f in analysis.whatif.fixes if f.cause == "comm:hidden")
    assert comm.saved_ms_per_step == pytest.approx(hidden.gain_ms)
    assert comm.basis == "replayed without it: no transfer time"


@pytest.fixture(scope="module")
def slow_node(tmp_path_factory):
    path = tmp_path_factory.mktemp("synthetic") / "run"
    truth = write_run(path, 32, 60, "slow_node", seed=3)
    run = load_run(path)
    return truth, run, analyze_run(run)


def test_a_slow_node_is_the_cause_and_the_imbalance_is_folded_into_it(slow_node):
    truth, run, analysis = slow_node
    findings = diagnose_run(run, analysis).findings
    node = findings[0]
    assert node.code == "NODE_STRAGGLER" and truth.slow_node in node.summary
    fix = next(f for f in analysis.whatif.fixes if f.cause == f"node:{truth.slow_node}")
    assert node.saved_ms_per_step == pytest.approx(fix.gain_ms)
    assert max(analysis.whatif.fixes, key=lambda f: f.gain_ms).cause.startswith(
        f"node:{truth.slow_node}"
    )
    imbalance = by_code(findings, "LOAD_IMBALANCE")
    assert imbalance.level == "info" and imbalance.saved_ms_per_step is None
    assert imbalance.basis == "explained by NODE_STRAGGLER"


def test_without_a_model_the_rules_figures_stay(slow_node):
    _, run, analysis = slow_node
    without = dataclasses.replace(analysis, whatif=None)
    node = by_code(diagnose_run(run, without).findings, "NODE_STRAGGLER")
    assert node.basis == "its ranks' mean busy time per step above the other nodes' ranks' mean"


def test_an_imbalance_stays_a_warning_without_a_slow_rank_or_node():
    imbalance = Finding("LOAD_IMBALANCE", "load imbalance", "s", 20.0, 5.0, (), ())
    analysis = analyze_run(load_run(RUNS / "balanced" / "run"))
    assert replayed_savings([imbalance], analysis) == [imbalance]
    straggler = Finding("STRAGGLER", "straggler", "s", 20.0, 5.0, (), (), rank=1)
    folded = replayed_savings([straggler, imbalance], dataclasses.replace(analysis, whatif=None))
    assert folded[1].level == "info" and folded[1].basis == "explained by STRAGGLER"


def test_input_waits_save_what_removing_the_data_phase_gains():
    run = load_run(RUNS / "input_bound" / "run")
    analysis = analyze_run(run)
    finding = by_code(diagnose_run(run, analysis).findings, "INPUT_BOUND")
    data = next(f for f in analysis.whatif.fixes if f.cause == "phase:data")
    assert finding.saved_ms_per_step == pytest.approx(data.gain_ms)
    assert finding.basis == "replayed without it: no data time"


def test_shared_cores_keep_their_run_queue_estimate_and_say_they_are_not_replayed():
    run = load_run(RUNS / "oversubscribed" / "run")
    analysis = analyze_run(run)
    finding = by_code(diagnose_run(run, analysis).findings, "OVERSUBSCRIBED")
    assert finding.basis.startswith("estimate: step time above a step that computes at")
    assert finding.basis.endswith(f"; {NOT_REPLAYED}")
    without_model = dataclasses.replace(analysis, whatif=None)
    assert (
        NOT_REPLAYED
        not in by_code(diagnose_run(run, without_model).findings, "OVERSUBSCRIBED").basis
    )
