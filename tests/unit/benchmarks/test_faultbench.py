"""The fault matrix's pieces (benchmarks/faultbench): its cases drawn from a seed, the fault
kept out of the recorded command line, and the score of a verdict against the truth, on
verdicts built by hand and on recorded runs."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from recorded_runs import RUNS

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks" / "faultbench"))
from cases import QUICK, Case, Truth, matrix  # noqa: E402
from report import write_doc  # noqa: E402
from score import Measured, score, totals  # noqa: E402

from scalescope.analyze.verdict import Cause, Cost, Culprit, Verdict  # noqa: E402
from scalescope.diagnose.recording import Recording  # noqa: E402

PLANTED = Path(__file__).resolve().parents[3] / "benchmarks" / "faultbench" / "planted.py"


def case(culprit: str | None, size: str = "clear", cause: str = "straggler") -> Case:
    truth = Truth(culprit, cause if culprit else "none", size if culprit else "none")
    return Case("c", "ddp", PLANTED, (), (), truth)


def verdict(culprit: str | None, code: str = "STRAGGLER", ms: float = 30.0) -> Verdict:
    if culprit is None:
        return Verdict("no bottleneck")
    kind, name = culprit.split(":")
    cost = Cost(ms, ms - 1, ms + 1, True)
    return Verdict("bottleneck", (Cause(code, "straggler", "late", Culprit(kind, name), cost),))


def test_the_matrix_is_drawn_from_its_seed() -> None:
    a, b, c = matrix(1), matrix(1), matrix(2)
    assert a == b and a != c
    names = [x.name for x in a]
    assert len(names) == len(set(names)) and set(QUICK) <= set(names)
    faults = [x for x in a if x.truth.culprit is not None]
    assert all(x.fault for x in faults) and all(not x.fault for x in a if x not in faults)


def test_a_named_culprit_and_class_pass_and_the_gain_is_judged() -> None:
    pairs = [Measured(70.0, 40.0), Measured(72.0, 41.0)]
    s = score(case("rank:1"), verdict("rank:1"), 28.0, pairs)
    assert s.passed and s.culprit_ok and s.cause_ok and s.gain_ok
    assert s.measured_ms == 30.5 and s.spread_ms == 1.0
    wrong = score(case("rank:1"), verdict("rank:0"), 28.0, pairs)
    assert not wrong.passed and wrong.culprit_ok is False
    off = score(case("rank:1"), verdict("rank:1"), 10.0, pairs)
    assert off.passed and off.gain_ok is False


def test_a_marginal_fault_may_go_unnamed_a_no_fault_run_may_not_be_costed() -> None:
    pairs = [Measured(45.0, 40.0)]
    assert score(case("rank:1", "marginal"), verdict(None), None, pairs).passed
    assert not score(case("rank:1", "clear"), verdict(None), None, pairs).passed
    alarm = score(case(None), verdict("rank:0", ms=3.0), None, [Measured(40.0, 40.0)])
    assert not alarm.passed and alarm.costed_on_no_fault
    t = totals([alarm, score(case("rank:1"), verdict("rank:1"), 30.0, [Measured(70, 40)])])
    assert t.no_fault_false_alarms == 1 and t.clear_culprit_pct == 100.0


@pytest.mark.parametrize("name, culprit", [("straggler_forward_2", "rank:1"),
                                           ("balanced", None)])  # fmt: skip
def test_recorded_runs_score_as_their_truth(name: str, culprit: str | None) -> None:
    rec = Recording.load(RUNS / name / "run")
    s = score(case(culprit), rec.verdict, None, [])
    assert s.passed, s


def test_the_fault_stays_out_of_the_command_line_and_the_doc_is_written(tmp_path) -> None:
    script = tmp_path / "show.py"
    script.write_text("import sys, json; print(json.dumps(sys.argv[1:]))")
    arm = tmp_path / "arm.json"
    arm.write_text(json.dumps({"script": str(script), "args": ["--sleep-rank", "1"]}))
    done = subprocess.run([sys.executable, str(PLANTED), str(arm)], capture_output=True,
                          text=True, check=True)  # fmt: skip
    assert json.loads(done.stdout) == ["--sleep-rank", "1"]
    c = case("rank:1")
    s = score(c, verdict("rank:1"), 29.0, [Measured(70.0, 40.0)])
    doc = tmp_path / "accuracy.md"
    meta = {"date": "2026-11-28", "seed": 1, "pairs": 1, "steps": 30}
    write_doc(doc, [c], [s], totals([s]), meta)
    text = doc.read_text()
    assert "| c | ddp | rank:1, straggler, clear | rank:1 (straggler) | yes | yes | 29.0 |" in text


def _flag(args: tuple[str, ...], name: str) -> str:
    return args[args.index(name) + 1]


def test_the_layouts_and_loops_carry_their_truths_drawn_from_the_seed() -> None:
    by_seed = [{c.name: c for c in matrix(seed)} for seed in range(8)]
    for cases in by_seed:
        pipe = cases["pipe-stage-clear"]
        assert pipe.truth == Truth(f"stage:{_flag(pipe.fault, '--heavy-stage')}",
                                   "pipeline stage", "clear")  # fmt: skip
        assert _flag(pipe.args, "--sleep-ms") == "0" and pipe.ranks == 2
        for name in ("fsdp-forward-clear", "lightning-forward-clear", "hf-forward-clear"):
            c = cases[name]
            assert c.truth == Truth(f"rank:{_flag(c.fault, '--sleep-rank')}", "straggler", "clear")
            assert 0.03 <= float(_flag(c.fault, "--sleep-s")) <= 0.05
            assert "--sleep-rank" not in c.args and "--step-log" in c.args
        assert {cases["lightning-forward-clear"].needs, cases["hf-forward-clear"].needs} == {
            "pytorch_lightning", "transformers"}  # fmt: skip
        stall = cases["ddp-periodic-stall"]
        assert stall.truth == Truth("rank:1", "straggler", "clear")
        assert (
            _flag(stall.fault, "--sleep-every") == "10"
            and _flag(stall.fault, "--sleep-s") == "0.15"
        )
    drawn = {(c["pipe-stage-clear"].truth.culprit, c["fsdp-forward-clear"].truth.culprit)
             for c in by_seed}  # fmt: skip
    assert len(drawn) > 1 and len(QUICK) <= 8


def test_the_pipelines_are_two_ranks_with_the_stage_or_the_schedule_as_truth() -> None:
    """Each unequal stage's truth is the stage that sleeps; too few microbatches is the
    schedule's, its clean arm the same batch in twice the microbatches."""
    for seed in range(4):
        cases = {c.name: c for c in matrix(seed) if c.name.startswith("pp-")}
        assert all(c.ranks == 2 and "--step-log" in c.args for c in cases.values())
        for name in ("pp-gpipe-stage-clear", "pp-1f1b-stage-clear",
                     "pp-interleaved-stage-clear", "pp-gpipe-stage-marginal"):  # fmt: skip
            c = cases[name]
            assert c.truth.culprit == f"stage:{_flag(c.fault, '--heavy-stage')}"
            assert c.truth.cause == "pipeline stage" and "--heavy-stage" not in c.args
        few = cases["pp-gpipe-few-microbatches"]
        assert few.truth.culprit == "schedule:ScheduleGPipe"
        assert (_flag(few.args, "--micro"), _flag(few.fault, "--micro")) == ("4", "2")


def test_a_periodic_stall_sleeps_in_every_kth_step_only() -> None:
    sys.path.insert(0, str(PLANTED.parents[2] / "tests" / "e2e" / "scripts"))
    from argparse import Namespace

    from ddp_train import due

    every = Namespace(sleep_from=0, sleep_every=10)
    assert [s for s in range(30) if due(every, s)] == [9, 19, 29]
    late = Namespace(sleep_from=12, sleep_every=0)
    assert [s for s in range(15) if due(late, s)] == [12, 13, 14]


def test_a_case_whose_loop_is_not_installed_is_skipped_not_failed(tmp_path) -> None:
    from run import run_case

    c = replace(case("rank:1"), name="loop", needs="no_such_training_loop")
    s = run_case(c, 1, tmp_path)
    assert s.skipped == "no_such_training_loop is not installed" and not s.passed
    ran = score(case("rank:1"), verdict("rank:1"), 29.0, [Measured(70.0, 40.0)])
    t = totals([s, ran])
    assert t.cases == 1 and t.clear_culprit_pct == 100.0
    doc = tmp_path / "accuracy.md"
    write_doc(doc, [c, case("rank:1")], [s, ran], t, {"date": "d", "seed": 1, "pairs": 1,
                                                       "steps": 30})  # fmt: skip
    assert "| skip: no_such_training_loop is not installed |" in doc.read_text()


def test_a_cause_the_what_if_cannot_take_is_predicted_by_the_verdicts_own_cost() -> None:
    from run import verdict_cost_ms

    bubble = verdict("stage:0", code="PIPELINE_BUBBLE", ms=5.0)
    assert verdict_cost_ms(bubble, "stage:0") == 5.0
    assert verdict_cost_ms(bubble, "stage:1") is None
    assert verdict_cost_ms(verdict(None), "stage:0") is None
