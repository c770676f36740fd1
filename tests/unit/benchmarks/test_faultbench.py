"""The fault matrix's pieces (benchmarks/faultbench): its cases drawn from a seed, the fault
kept out of the recorded command line, and the score of a verdict against the truth, on
verdicts built by hand and on recorded runs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import pytest
from recorded_runs import RUNS

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks" / "faultbench"))
from alerts import alert_delay_s, names  # noqa: E402
from cases import MIDRUN_AFTER, MIDRUN_SCALE, QUICK, Case, Truth, matrix  # noqa: E402
from cases_synthetic import RANKS, Synthetic, synthetic_case  # noqa: E402
from report import write_doc  # noqa: E402
from run import run_case  # noqa: E402
from score import (  # noqa: E402
    TOO_NOISY_TO_CONFIRM,
    Measured,
    Predicted,
    score,
    thirds_recorded,
    totals,
    unsettled_claims,
)

from scalescope.analyze.verdict import Cause, Cost, Culprit, Verdict  # noqa: E402
from scalescope.analyze.watch.slowdown_alerts import read_alerts  # noqa: E402
from scalescope.diagnose.recording import Recording  # noqa: E402
from synthetic_run import Plant  # noqa: E402

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


def test_a_no_fault_runs_own_communication_passes_only_where_its_measure_holds() -> None:
    comm = Cause("COMM_LATENCY", "communication latency", "exposed", None,
                 Cost(4.0, 3.0, 5.0, True))  # fmt: skip
    said = Verdict("bottleneck", (comm,))
    held = score(
        case(None), said, None, [Measured(8, 8)], thirds={"communication": [Measured(8.0, 4.3)]}
    )
    assert held.passed and held.confirmed and not held.costed_on_no_fault
    assert held.alone_ms == pytest.approx(3.7)
    off = score(
        case(None), said, None, [Measured(8, 8)], thirds={"communication": [Measured(8.0, 7.0)]}
    )
    assert not off.passed and off.costed_on_no_fault and not off.confirmed
    unmeasured = score(case(None), said, None, [Measured(8, 8)])
    assert not unmeasured.passed
    rank = Verdict("bottleneck", (comm, replace(comm, code="STRAGGLER",
                                                culprit=Culprit("rank", "1"))))  # fmt: skip
    assert not score(
        case(None), rank, None, [Measured(8, 8)], thirds={"communication": [Measured(8.0, 4.3)]}
    ).passed


def test_a_no_fault_runs_own_input_loading_is_judged_against_the_run_without_it() -> None:
    """Each of the job's own costs against the arm without that cost: the input loading's
    claim against ``--preload``'s gain, never against ``--no-sync``'s."""
    data = Cause("INPUT_BOUND", "input pipeline", "ranks wait", None, Cost(1.2, 1.0, 1.4, True))
    comm = Cause("COMM_LATENCY", "communication latency", "exposed", None,
                 Cost(2.3, 1.0, 3.5, True))  # fmt: skip
    said = Verdict("bottleneck", (data, comm))
    pairs, alone = [Measured(8, 8)], [Measured(8.0, 5.0)]
    both = score(
        case(None),
        said,
        None,
        pairs,
        thirds={"communication": alone, "input": [Measured(8.0, 7.0)]},
    )
    assert both.passed and set(both.confirmed) == {data.short, comm.short}
    assert both.input_ms == pytest.approx(1.0) and both.alone_ms == pytest.approx(3.0)
    small = score(
        case(None),
        said,
        None,
        pairs,
        thirds={"communication": alone, "input": [Measured(8.0, 7.6)]},
    )
    assert not small.passed and small.costed_on_no_fault == (data.short,)
    no_arm = score(case(None), said, None, pairs, thirds={"communication": alone})
    assert no_arm.costed_on_no_fault == (data.short,) and no_arm.input_ms is None
    late = replace(data, code="STRAGGLER", culprit=Culprit("rank", "1"))  # a rank's: a fault
    one = score(case(None), Verdict("bottleneck", (late,)), None, pairs,
                thirds={"input": [Measured(8.0, 5.0)]})  # fmt: skip
    assert not one.passed


def test_a_no_fault_claim_its_arm_is_too_noisy_to_confirm_is_a_false_alarm() -> None:
    """Arms without the input loading that gain 4.0 and 0.1 ms/step: their median's standard
    error (2.4 ms) exceeds the tolerance, so the 1.2 ms claim is neither confirmed nor
    refuted: the runner adds pairs for it, and one still that noisy counts against it."""
    data = Cause("INPUT_BOUND", "input pipeline", "ranks wait", None, Cost(1.2, 1.0, 1.4, True))
    said, pairs = Verdict("bottleneck", (data,)), [Measured(8, 8), Measured(8, 8)]
    swinging = {"input": [Measured(8.0, 4.0), Measured(8.0, 7.9)]}
    assert unsettled_claims(said, swinging) == ["input"]
    assert unsettled_claims(Verdict("no bottleneck"), swinging) == []
    noisy = score(case(None), said, None, pairs, thirds=swinging)
    assert not noisy.passed and not noisy.confirmed
    assert noisy.costed_on_no_fault == (f"{data.short} ({TOO_NOISY_TO_CONFIRM})",)
    steady = {"input": [Measured(8.0, 6.6), Measured(8.0, 6.4)]}
    assert unsettled_claims(said, steady) == []
    assert score(case(None), said, None, pairs, thirds=steady).confirmed == (data.short,)


@pytest.mark.parametrize("gains, pairs", [((4.0, 4.2, 4.1), 2), ((1.0, 9.0), 7)])
def test_the_runner_adds_pairs_while_a_no_fault_claim_cannot_be_confirmed(
    monkeypatch, tmp_path, gains, pairs
) -> None:  # fmt: skip
    """The recorded ddp-none-0 run claims the job's own communication (~3 ms/step) as each
    planted arm: arms without it that agree settle it at the pairs asked for; arms that keep
    swinging get pairs up to seven, and the claim is a false alarm still."""
    import run

    recorded = RUNS.parent / "faultbench" / "ddp-none-0" / "run"

    def made(c, folder: Path, *_) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copytree(recorded, folder / "run")
        return folder

    def clock(c, folder: Path) -> float:
        pair = int(folder.name.removeprefix("none-").split("-")[0])
        return 8.0 - gains[pair % len(gains)] if folder.name.endswith("alone") else 8.0

    for name, fake in (("arm", made), ("run_arm", made), ("step_ms", clock),
                       ("own_step_ms", clock)):  # fmt: skip
        monkeypatch.setattr(run, name, fake)
    c = Case("none", "ddp", PLANTED, (), (), Truth(None, "none", "none"), alone=("--no-sync",))
    scored = run_case(c, 2, tmp_path)
    assert len(list(tmp_path.glob("none-*-alone"))) == pairs
    assert scored.passed == (pairs == 2) and bool(scored.confirmed) == scored.passed
    assert all(TOO_NOISY_TO_CONFIRM in x for x in scored.costed_on_no_fault)


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
        assert (_flag(few.args, "--micro"), _flag(few.fault, "--micro")) == ("2", "1")


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
    from predicted import median_prediction, verdict_cost

    bubble = verdict("stage:0", code="PIPELINE_BUBBLE", ms=5.0)
    margin = 0.12 * 5.0  # the replay's own error (bootstrap.MODEL_ERROR) besides its range
    assert verdict_cost(bubble, "stage:0") == Predicted(5.0, 4.0 - margin, 6.0 + margin)
    (cause,) = bubble.causes
    estimate = replace(cause, cost=replace(cause.cost, replayed=False))
    guessed = Verdict("bottleneck", (estimate,))
    assert verdict_cost(guessed, "stage:0") == Predicted(5.0, 4.0, 6.0)
    assert verdict_cost(bubble, "stage:1") is None
    assert verdict_cost(verdict(None), "stage:0") is None
    picks = [Predicted(3.0, 1.0, 4.0), None, Predicted(1.0, 0.0, 2.0), Predicted(2.0, 1.5, 3.0)]
    assert median_prediction(picks) == Predicted(2.0, 1.5, 3.0) and not median_prediction([])


def test_the_gains_interval_is_judged_against_the_measured_gain_and_totalled() -> None:
    pairs = [Measured(70.0, 40.0), Measured(72.0, 41.0)]  # measured 30.5, step 71
    held = score(case("rank:1"), verdict("rank:1"), Predicted(29.0, 27.0, 31.0), pairs)
    assert held.interval_ok and held.interval_width_ms == 4.0
    assert held.interval_width_pct == pytest.approx(100 * 4.0 / 71.0)
    missed = score(case("rank:1"), verdict("rank:1"), Predicted(25.0, 24.0, 26.0), pairs)
    assert missed.interval_ok is False and missed.interval_width_ms == 2.0
    bare = score(case("rank:1"), verdict("rank:1"), 29.0, pairs)
    assert bare.interval_ok is None and bare.gain_low_ms is None
    t = totals([held, missed, bare, score(case(None), verdict(None), None, pairs)])
    assert t.interval_holds_pct == 50.0 and t.interval_median_width_ms == 3.0
    assert t.interval_median_width_pct == pytest.approx(100 * 3.0 / 71.0)


def test_a_mid_run_case_scores_its_live_alert_within_15_s() -> None:
    mid = replace(case("rank:1"), since=240)
    pairs = [Measured(80.0, 40.0)]
    assert score(mid, verdict("rank:1"), 40.0, pairs, alert_s=4.2).alert_ok
    late = score(mid, verdict("rank:1"), 40.0, pairs, alert_s=16.0)
    assert late.alert_ok is False and late.alert_s == 16.0
    assert score(mid, verdict("rank:1"), 40.0, pairs, alert_s=None).alert_ok is False
    steady = score(case("rank:1"), verdict("rank:1"), 40.0, pairs, alert_s=None)
    assert steady.alert_ok is None and totals([late, steady]).alerts_ok_pct == 0.0


def test_the_recorded_mid_run_slowdowns_alert_names_rank_2_seconds_after_its_onset() -> None:
    """tests/data/runs/slowdown_rank: rank 2 slowed from step 220; the onset alert (rank 2,
    since step 216) came 2.4 s after step 220 began on rank 2."""
    run_dir = RUNS / "slowdown_rank" / "run"
    (alert,) = [a for a in read_alerts(run_dir) if a.event == "onset"]
    assert names(alert, "rank:2") and not names(alert, "rank:1")
    assert not names(alert, "stage:2")
    assert alert_delay_s(run_dir, "rank:2", 220) == pytest.approx(2.45, abs=0.01)
    assert alert_delay_s(run_dir, "rank:1", 220) is None
    assert alert_delay_s(run_dir, "rank:2", 10**6) is None  # no such step


def test_the_mid_run_case_runs_long_enough_for_the_live_watch() -> None:
    for seed in range(4):
        mid = {c.name: c for c in matrix(seed)}["ddp-forward-midrun"]
        assert int(_flag(mid.fault, "--sleep-from")) == mid.since >= 10 * MIDRUN_SCALE
        assert _flag(mid.args, "--steps") == str(mid.since + MIDRUN_AFTER)


def test_the_doc_shows_the_interval_the_alert_and_each_tables_seed(tmp_path) -> None:
    mid = replace(case("rank:1"), since=240)
    s = replace(score(mid, verdict("rank:1"), Predicted(29.0, 27.0, 31.0),
                      [Measured(70.0, 40.0)], alert_s=3.25), seed=4901)  # fmt: skip
    doc = tmp_path / "accuracy-heldout.md"
    meta = {"date": "d", "seed": [4901], "held_out": True, "pairs": 1, "steps": 30}
    write_doc(doc, [mid], [s], totals([s]), meta)
    text = doc.read_text()
    assert "### Seed 4901 (held-out: scored once, thresholds frozen)" in text
    assert "| 30.0 | yes | 27.0-31.0: yes | 3.2 s: yes | pass |" in text
    assert "holds the measured gain in 100 % of the fault cases" in text
    assert "within 15 s of the onset: 100 %" in text and "**Held out**" in text


def test_a_tuning_run_never_writes_the_held_out_doc(monkeypatch) -> None:
    import run

    monkeypatch.setattr(sys, "argv", ["run.py", "--doc", str(run.HELD_OUT_DOC)])
    with pytest.raises(SystemExit, match="held-out"):
        run.doc_path(run.parse())
    monkeypatch.setattr(sys, "argv", ["run.py", "--held-out"])
    assert run.doc_path(run.parse()) == run.HELD_OUT_DOC
    monkeypatch.setattr(sys, "argv", ["run.py"])
    assert run.doc_path(run.parse()).name == "accuracy.md"
    monkeypatch.setattr(sys, "argv", ["run.py", "--held-out", "--held-out-seeds", "1"])
    assert run.held_out_seeds(run.parse()) == run.HELD_OUT_SEEDS[:1]
    monkeypatch.setattr(sys, "argv", ["run.py", "--held-out", "--held-out-seeds", "0"])
    with pytest.raises(SystemExit, match=f"must be 1 to {len(run.HELD_OUT_SEEDS)}"):
        run.held_out_seeds(run.parse())


def test_one_held_out_seed_goes_to_its_own_doc_once(monkeypatch, tmp_path) -> None:
    import run

    monkeypatch.setattr(run, "HELD_OUT_DOC", tmp_path / "accuracy-heldout.md")
    seed = run.HELD_OUT_SEEDS[1]
    monkeypatch.setattr(sys, "argv", ["run.py", "--held-out", "--held-out-seed", str(seed)])
    args = run.parse()
    assert run.held_out_seeds(args) == (seed,)
    assert run.doc_path(args) == tmp_path / f"accuracy-heldout-{seed}.md"
    (tmp_path / f"accuracy-heldout-{seed}.md").write_text("scored\n")
    with pytest.raises(SystemExit, match="scored once"):
        run.doc_path(args)
    monkeypatch.setattr(
        sys, "argv", ["run.py", "--doc", str(tmp_path / "accuracy-heldout-4903.md")]
    )
    with pytest.raises(SystemExit, match="held-out"):
        run.doc_path(run.parse())


def test_a_rescore_judges_the_interval_of_the_recorded_run_against_the_kept_gain() -> None:
    from rescore import rescored

    folder = RUNS.parent / "faultbench" / "gpt-rank0-eval"
    doc = json.loads((folder / "truth.json").read_text())
    c = Case(doc["case"], "recorded", folder, (), (), Truth(**doc["truth"]))
    now = rescored(c, Recording.load(folder / "run"), doc["score"], "phase:eval")
    assert now["gain_low_ms"] < now["measured_ms"] < now["gain_high_ms"]
    assert now["interval_ok"] and now["measured_ms"] == doc["score"]["measured_ms"]


def test_a_recorded_no_fault_case_is_scored_with_its_recorded_no_sync_arms() -> None:
    """Its communication is confirmed by the job run without it, as in the matrix: without
    those arms the same verdict is a false alarm."""
    from rescore import rescored

    folder = RUNS.parent / "faultbench" / "ddp-none-0"
    doc = json.loads((folder / "truth.json").read_text())
    c = Case(doc["case"], "recorded", folder, (), (), Truth(**doc["truth"]))
    rec = Recording.load(folder / "run")
    thirds = thirds_recorded(doc)
    assert thirds["communication"] and all(m.gain_ms > 0 for m in thirds["communication"])
    with_arms = rescored(c, rec, doc["score"], None, thirds)
    assert with_arms["passed"] and with_arms["confirmed"] and not with_arms["costed_on_no_fault"]
    without = rescored(c, rec, doc["score"], None)
    assert not without["passed"] and without["costed_on_no_fault"] == with_arms["confirmed"]


def test_the_doc_shows_the_run_it_replaces_and_the_cases_that_moved(tmp_path) -> None:
    from dataclasses import asdict

    c = case("rank:1")
    passed = score(c, verdict("rank:1"), 29.0, [Measured(70.0, 40.0)])
    failed = score(c, verdict("rank:0"), 29.0, [Measured(70.0, 40.0)])
    meta = {"date": "2026-11-29", "seed": 1, "pairs": 1, "steps": 30,
            "cases": [asdict(failed)], "totals": asdict(totals([failed]))}  # fmt: skip
    before = {"date": "2026-11-28", "seed": 1, "cases": [asdict(passed)],
              "totals": asdict(totals([passed]))}  # fmt: skip
    doc = tmp_path / "accuracy.md"
    write_doc(doc, [c], [failed], totals([failed]), meta, before)
    text = doc.read_text()
    assert "## Against the previous run (2026-11-28, seed 1)" in text
    assert "| clear_culprit_pct | 100.0 | 0.0 |" in text
    assert "- c: pass -> fail (rank:0 (straggler))" in text
    write_doc(doc, [c], [failed], totals([failed]), meta)
    assert "Against the previous run" not in doc.read_text()


def test_the_tuning_doc_tabulates_each_held_out_seed_as_scored_once(tmp_path) -> None:
    """The held-out files beside the doc, a row a seed in seed order (the first seed's file
    has no number, nor a count of noisy truths); a held-out doc does not list them, nor does
    a doc with none beside it."""
    c = case("rank:1")
    s = score(c, verdict("rank:1"), 29.0, [Measured(70.0, 40.0)])
    meta = {"date": "2026-11-29", "seed": 1, "pairs": 1, "steps": 30}
    first = {k: v for k, v in asdict(totals([s])).items() if k != "noisy_truths"}
    held = {"accuracy-heldout-4902": (4902, asdict(totals([s])) | {"gain_within_pct": 87.25}),
            "accuracy-heldout": (4901, first | {"gain_within_pct": 83.0})}  # fmt: skip
    for name, (seed, total) in held.items():
        doc = {"date": "2026-11-28", "seed": [seed], "held_out": True, "pairs": 2, "totals": total}
        (tmp_path / f"{name}.json").write_text(json.dumps(doc))
    write_doc(tmp_path / "accuracy.md", [c], [s], totals([s]), meta)
    rows = [x for x in (tmp_path / "accuracy.md").read_text().splitlines() if x.startswith("| 490")]
    assert [r.split(" | ")[:3] for r in rows] == [
        ["| 4901", "2026-11-28", "2"],
        ["| 4902", "2026-11-28", "2"],
    ]
    assert " | 83.0 | n/a | " in rows[0] and " | 87.2 | 0 | " in rows[1]
    write_doc(tmp_path / "held.md", [c], [s], totals([s]), {**meta, "held_out": True})
    assert "## The held-out seeds" not in (tmp_path / "held.md").read_text()
    (tmp_path / "alone").mkdir()
    write_doc(tmp_path / "alone" / "accuracy.md", [c], [s], totals([s]), meta)
    assert "## The held-out seeds" not in (tmp_path / "alone" / "accuracy.md").read_text()


def test_the_synthetic_cases_are_drawn_at_1024_ranks_named_as_the_verdict_names() -> None:
    cases = [c for c in matrix(1) if c.synthetic is not None]
    assert len(cases) >= 8 and all(c.ranks == RANKS for c in cases)
    culprits = {c.name: c.truth.culprit for c in cases}
    assert culprits["syn-none-0"] is None and culprits["syn-none-1"] is None
    assert culprits["syn-node-clear"].startswith("node:node")
    assert culprits["syn-link-clear"].startswith("link:node") and "," in culprits["syn-link-clear"]
    assert culprits["syn-stage-clear"].startswith("stage:")
    midrun = next(c for c in cases if c.name == "syn-rank-midrun")
    assert midrun.since == midrun.synthetic.plant.from_step > 0


def test_a_small_synthetic_case_runs_through_the_runner_and_names_its_plant(tmp_path) -> None:
    """16 ranks x 12 steps, one rank 30 % slower: generated with and without it from one noise
    seed, the verdict names the rank and the what-if's gain is the regenerated run's."""
    spec = Synthetic(16, 12, seed=5, plant=Plant("slow_rank", 5, 1.3))
    scored = run_case(synthetic_case("syn-small", spec, "clear"), 1, tmp_path)
    assert scored.passed and scored.named == "rank:5 (straggler)", scored
    assert scored.measured_ms > 10 and scored.gain_ok, scored


def test_a_truth_too_noisy_is_never_judged_and_counts_against_the_gains() -> None:
    """Gains 30 and 50 ms/step: their median's standard error (12.5 ms) exceeds the tolerance
    (20 % of 40 ms): the prediction is not judged, and the totals count it as a miss."""
    noisy = [Measured(70.0, 40.0), Measured(90.0, 40.0)]
    s = score(case("rank:1"), verdict("rank:1"), 40.0, noisy)
    assert s.noisy and s.gain_ok is None and s.passed and s.spread_ms == 20.0
    quiet = score(case("rank:1"), verdict("rank:1"), 30.0, [Measured(70.0, 40.0),
                                                          Measured(72.0, 41.0)])  # fmt: skip
    assert not quiet.noisy and quiet.gain_ok
    t = totals([s, quiet])
    assert t.gain_within_pct == 50.0 and t.noisy_truths == 1


@pytest.mark.parametrize("planted, pairs", [((70.0, 90.0, 80.0), 3), ((60.0, 100.0), 7)])
def test_the_runner_adds_pairs_while_the_truth_is_too_noisy(monkeypatch, tmp_path, planted,
                                                            pairs) -> None:  # fmt: skip
    """The planted arm's clock (the script's, here given) decides: a third pair that settles
    the median stops there; gains that keep swinging stop at seven pairs, too noisy."""
    import run

    def clock(c, folder: Path) -> float:
        pair = int(folder.name.split("-")[-2])
        return planted[pair % len(planted)] if folder.name.endswith("planted") else 40.0

    monkeypatch.setattr(run, "step_ms", clock)
    spec = Synthetic(16, 12, seed=5, plant=Plant("slow_rank", 5, 1.3))
    scored = run_case(synthetic_case("syn-small", spec, "clear"), 2, tmp_path)
    assert len(list(tmp_path.glob("syn-small-*-planted"))) == pairs
    assert scored.noisy == (pairs == 7) and (scored.gain_ok is None) == scored.noisy
    shutil.rmtree(tmp_path / f"syn-small-{pairs - 1}-clean")  # a run stopped mid-pair
    again = run_case(synthetic_case("syn-small", spec, "clear"), 2, tmp_path)
    assert len(list(tmp_path.glob("syn-small-*-planted"))) == pairs and again == scored


def test_a_kept_run_is_rescored_from_its_folders_beside_the_doc_before(tmp_path) -> None:
    """``run.py --rescore-kept``: the case's pairs re-read from the kept folders (the same
    measured gain), its verdict and prediction by this code, the doc before beside it; the
    held-out matrix is never rescored."""
    from rescore import rescore_kept

    small = synthetic_case(
        "syn-small", Synthetic(16, 12, seed=5, plant=Plant("slow_rank", 5, 1.3)), "clear"
    )
    keep, out = tmp_path / "keep", tmp_path / "acc.md"
    scored = run_case(small, 2, keep)
    doc = {"date": "2026-11-28", "seed": 49, "held_out": False, "pairs": 2, "steps": 12,
           "cases": [asdict(replace(scored, named="rank:0 (straggler)", passed=False))],
           "totals": asdict(totals([scored]))}  # fmt: skip
    out.with_suffix(".json").write_text(json.dumps(doc))
    assert rescore_kept(keep, out, "why", {small.name: small}) == 0
    again = json.loads(out.with_suffix(".json").read_text())
    assert again["note"] == "why" and again["cases"][0]["named"] == "rank:5 (straggler)"
    assert again["cases"][0]["measured_ms"] == scored.measured_ms and again["cases"][0]["passed"]
    assert "syn-small" in out.read_text()
    out.with_suffix(".json").write_text(json.dumps({**doc, "held_out": True}))
    with pytest.raises(SystemExit, match="scored once"):
        rescore_kept(keep, out, "why", {small.name: small})


def test_the_multi_host_cases_throttle_a_drawn_link_out_of_the_command_line() -> None:
    """Three namespaced hosts, one rank each; the throttled pair and its rate are drawn from
    the seed, and the truth names that pair's hosts as the verdict names a link."""
    drawn = [{c.name: c for c in matrix(seed)} for seed in range(8)]
    for cases in drawn:
        for size in ("clear", "marginal"):
            c = cases[f"netns-link-{size}"]
            a, b = c.netns.pair
            assert c.ranks == c.netns.hosts == 3 and c.truth.size == size
            assert c.truth.culprit == f"link:{','.join(sorted((f'host{a}', f'host{b}')))}"
            assert c.netns.rate not in " ".join(c.args) and "--throttle" not in c.args
    assert len({(d["netns-link-clear"].netns.pair, d["netns-link-clear"].netns.rate)
                for d in drawn}) > 1  # fmt: skip


def test_a_communication_cause_without_a_culprit_blames_the_jobs_communication() -> None:
    comm = Cause("FSDP_SMALL_UNITS", "small units", "gathers", None, Cost(9.0, 8.0, 10.0, True))
    exposed = case("comm:hidden", cause="communication")
    s = score(exposed, Verdict("bottleneck", (comm,)), 9.0, [Measured(50.0, 41.0)])
    assert s.passed and s.named == "comm:hidden (communication)"
    other = replace(comm, code="INPUT_BOUND")
    assert not score(exposed, Verdict("bottleneck", (other,)), 9.0, [Measured(50.0, 41.0)]).passed


def test_the_matrix_holds_40_cases_a_quarter_of_its_real_jobs_through_installed_loops() -> None:
    for seed in (1, 49):
        cases = matrix(seed)
        real = [c for c in cases if c.synthetic is None]
        loops = [c for c in real if c.needs in ("pytorch_lightning", "transformers", "deepspeed")]
        assert len(cases) >= 40 and 4 * len(loops) >= len(real), (len(cases), len(loops))
        sizes = {c.truth.size for c in cases}
        assert {"clear", "marginal", "none"} <= sizes


def test_a_generated_mid_run_case_has_no_live_alert_to_judge() -> None:
    spec = Synthetic(16, 12, seed=5, plant=Plant("slow_rank", 5, 1.3))
    generated = replace(synthetic_case("syn-mid", spec, "clear"), since=6)
    scored = score(generated, verdict("rank:5"), 10.0, [Measured(50.0, 40.0)], alert_s=None)
    assert scored.alert_ok is None and scored.alert_s is None


def test_a_failed_host_stops_the_others_and_what_they_started(tmp_path) -> None:
    import netns

    pid_file = tmp_path / "grandchild"
    starts = ("import subprocess, sys, time; "
              "p = subprocess.Popen(['sleep', '60'], start_new_session=True); "
              "open(sys.argv[1], 'w').write(str(p.pid)); time.sleep(60)")  # fmt: skip
    running = subprocess.Popen([sys.executable, "-c", starts, str(pid_file)])
    failing = subprocess.Popen(["sh", "-c", "sleep 1; exit 3"])
    while not pid_file.exists() or not pid_file.read_text().strip():
        time.sleep(0.01)
    grandchild = int(pid_file.read_text())
    assert netns._ended([running, failing]) == 1
    assert running.returncode is not None
    deadline = time.monotonic() + 5
    while _alive(grandchild):
        assert time.monotonic() < deadline, "the host's own session's child outlived it"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_with_cores_per_rank_each_rank_runs_on_cores_of_its_own(monkeypatch, tmp_path) -> None:
    """``run.py --cores-per-rank K``: each rank of an arm (a netns host's one rank too) gets
    K cores no other rank has; a machine without them is refused before any arm runs."""
    import run
    from cases import ROOM_VARIABLE, room_options

    monkeypatch.delenv(ROOM_VARIABLE, raising=False)
    assert room_options(2) == ()
    monkeypatch.setenv(ROOM_VARIABLE, "4")
    assert room_options(2) == ("--cpu-list", "0-3", "--cpu-list", "4-7", "--threads-per-rank", "4")
    assert room_options(1, 2) == ("--cpu-list", "8-11", "--threads-per-rank", "4")
    script = tmp_path / "cores.py"
    script.write_text("import json, os\nopen(f\"cores-{os.environ['RANK']}.json\", 'w').write("
                      "json.dumps(sorted(os.sched_getaffinity(0))))\n")  # fmt: skip
    monkeypatch.setenv(ROOM_VARIABLE, "1")
    c = Case("cores", "ddp", script, (), (), Truth(None, "none", "none"))
    folder = run.run_arm(c, tmp_path / "arm", planted=True)
    assert [json.loads((folder / f"cores-{r}.json").read_text()) for r in (0, 1)] == [[0], [1]]
    with pytest.raises(SystemExit, match=r"--cores-per-rank 64: the cases need cores 0-127 "):
        run.room_check(64, [c])


def test_the_docs_misses_section_is_the_one_the_runner_writes() -> None:
    """docs/accuracy.md's "Where it misses" is report.MISSES, so the next run keeps it."""
    from report import MISSES

    doc = (Path(__file__).resolve().parents[3] / "docs" / "accuracy.md").read_text()
    section = doc[doc.index(MISSES[0]) : doc.index("## The held-out seeds")]
    assert section.strip() == "\n".join(MISSES).strip()
