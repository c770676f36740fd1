"""What the diagnosis of each recorded run must say, against the truth measured beside the run
while it was recorded (``scenario.json``): the bottleneck named first, its rank and phase,
its share of step time within ``TOLERANCE`` points of the truth, the remedy that fits.

The runs are real (tests/data/record.py made them on this 2-core machine); only the
recording is fixed, so these checks cannot flake, and a change that breaks a rule, the
analysis or the probe's reading of a run fails them whatever the report's words.
"""

from __future__ import annotations

import json
import re

import pytest
from analysed import analysed  # noqa: E402
from recorded_runs import Report, Scenario, first_finding, load_scenario, report_of
from stragglers import OUTSIDE, WHERE

from scalescope.diagnose import diagnose_run
from scalescope.events import Kind, load_run

TOLERANCE = 10.0
"""Points of step-time share the reported cost may differ from the truth."""


def reported(name: str) -> tuple[Scenario, Report]:
    s = load_scenario(name)
    return s, report_of(s)


def codes(report: Report) -> list[tuple[str, str]]:
    return [(f["code"], f["summary"]) for f in report.diagnosis["findings"]]


def assert_near_truth(finding: dict, truth: dict) -> None:
    share = finding["share_pct"]
    assert abs(share - truth["share_pct"]) <= TOLERANCE, (share, truth)


def test_balanced_run_raises_no_false_alarm() -> None:
    _s, r = reported("balanced")
    d = r.diagnosis
    assert [f for f in d["findings"] if f["level"] == "warning"] == [], codes(r)
    assert d["verdict"]["line"].startswith("no clear bottleneck")
    assert [f["code"] for f in d["findings"]] == ["COMPUTE"]


def test_input_bound_is_named_first_with_its_share() -> None:
    s, r = reported("input_bound")
    first = first_finding(r)
    assert first["code"] == "INPUT_BOUND", codes(r)
    assert_near_truth(first, s.truth)
    assert any("--workers" in remedy for remedy in first["remedies"])


def test_oversubscribed_threads_named_first_at_their_cost() -> None:
    """Reported with ``--baseline`` the balanced run (the FLOP/s fraction it reached is the
    expected one); named first with the default thresholds too."""
    s, r = reported("oversubscribed")
    first = first_finding(r)
    assert (first["code"], first["bottleneck"]) == ("OVERSUBSCRIBED", "CPU placement")
    assert "--threads-per-rank 1" in first["remedies"][0]
    assert_near_truth(first, s.truth)
    run = load_run(s.run_dir)
    assert diagnose_run(run, analysed(run)).findings[0].code == "OVERSUBSCRIBED"


def test_straggler_on_a_shared_core_is_rank_1() -> None:
    s, r = reported("straggler_shared_core")
    first = first_finding(r)
    assert (first["code"], first["rank"]) == ("STRAGGLER", 1), codes(r)
    assert_near_truth(first, s.truth)
    assert first["remedies"][0].startswith("rank 1's threads were preempted")
    assert "(cpus 1 on " in first["remedies"][0]


def test_compute_bound_resnet50_comes_first() -> None:
    s, r = reported("compute_resnet50")
    first = first_finding(r)
    assert first["code"] == "COMPUTE", codes(r)
    assert_near_truth(first, s.truth)
    assert any(e["name"].startswith("estimated fp32 peak") for e in first["evidence"])


def test_communication_bound_over_a_throttled_link() -> None:
    s, r = reported("comm_bound")
    first = first_finding(r)
    assert first["code"] == "COMM_BANDWIDTH", codes(r)
    assert_near_truth(first, s.truth)
    assert "bf16_compress_hook" in first["remedies"][0]


STRAGGLERS = [(where, 2) for where in WHERE] + [("outside", 3)]


@pytest.mark.parametrize(("where", "ranks"), STRAGGLERS)
def test_the_straggler_and_its_phase_are_named_first(where: str, ranks: int) -> None:
    """With 3 ranks on 2 cpus the truth is the range between the step time lost and the
    sleep's share: the reference steps pay for 3 ranks sharing 2 cpus, which the delayed
    steps partly escape while the sleeper sleeps; the sleep's share misses the competition
    once it wakes."""
    s, r = reported(f"straggler_{where}_{ranks}")
    first = first_finding(r)
    assert (first["code"], first["rank"], first["level"]) == ("STRAGGLER", 1, "warning"), codes(r)
    phase, words = WHERE[where]
    evidence = [e["name"] for e in first["evidence"]]
    assert f"its extra time {phase} per step" in evidence, evidence
    assert first["summary"].startswith(words), first["summary"]
    assert r.diagnosis["verdict"]["line"].startswith(f"straggler: {words}")
    truth = [s.truth["share_pct"]]
    if ranks > 2:
        truth.append(s.truth["sleep_share_pct"])
    off = max(min(truth) - first["share_pct"], first["share_pct"] - max(truth), 0.0)
    assert off <= TOLERANCE, (first["share_pct"], s.truth)


def test_outside_the_phases_says_where_and_what_to_look_for() -> None:
    s, r = reported("straggler_outside_2")
    first = first_finding(r)
    said = re.search(rf"of rank 1: (\d+) ms per step, {OUTSIDE}; the others wait", first["summary"])
    assert said, first["summary"]
    assert float(said[1]) == pytest.approx(s.truth["slept_ms"], rel=0.15)
    assert first["remedies"][0].startswith(f"look for per-step host work on rank 1 ({OUTSIDE})")
    steps = analysed(load_run(s.run_dir)).steps
    other = {p.phase: p.mean_ms for p in steps.ranks[1].phases}["other"]
    assert other == pytest.approx(s.truth["slept_ms"], rel=0.15), "the other row holds it"
    text = " ".join(r.text.split())
    assert "verdict: straggler: time outside the recorded phases of rank 1" in text
    assert "no clear bottleneck" not in text


@pytest.mark.parametrize(
    ("name", "kind"),
    [("straggler_forward_2", "waits"), ("straggler_backward_2", "waits"),
     ("straggler_optimizer_2", "waits"), ("straggler_forward_spin_2", "computes")],
)  # fmt: skip
def test_a_late_phase_is_told_waiting_or_computing(name: str, kind: str) -> None:
    """Rank 1 sleeps 70 ms a step in a phase, or spins as long there: its CPU time in the phase
    above its peer's is what the script's own clock says it spun (its loop's real durations),
    and none of what it slept. A sleep's remedy says it waits there; a spin's, it computes."""
    s, r = reported(name)
    cpu = analysed(load_run(s.run_dir)).cross_rank.straggler.cpu
    slept = s.truth["slept_ms"]
    assert cpu is not None
    assert cpu.wall_excess_ms == pytest.approx(slept, rel=0.15)
    if kind == "waits":
        assert cpu.waited_ms == pytest.approx(slept, rel=0.15)
        assert abs(cpu.computed_ms) < 0.1 * slept
    else:
        assert cpu.computed_ms == pytest.approx(slept, rel=0.15)
        assert abs(cpu.waited_ms) < 0.2 * slept
    words = {"waits": "asleep or blocked", "computes": "of it computing"}[kind]
    assert words in first_finding(r)["remedies"][0], first_finding(r)["remedies"]


def test_waiting_and_transfer_of_a_straggler_in_forward() -> None:
    """Rank 0 waits rank 1's sleep in each step; the transfer itself is what a balanced
    run's is (the forward straggler against the same run's steps before the sleeps)."""
    s = load_scenario("straggler_forward_2")
    cross = analysed(load_run(s.run_dir)).cross_rank
    assert cross is not None and cross.straggler is not None
    assert (cross.straggler.rank, cross.straggler.phase) == (1, "forward")
    assert cross.straggler.phase_excess_ms == pytest.approx(s.truth["slept_ms"], rel=0.15)
    waits = {w.rank: w.wait_ms_per_step for w in cross.ranks}
    assert waits[0] == pytest.approx(s.truth["slept_ms"], rel=0.15)
    assert waits[1] < 0.1 * s.truth["slept_ms"]
    clocks = {c.rank: c for c in cross.clocks}
    assert clocks[0].method == "reference" and clocks[0].offset_ns == 0
    assert clocks[1].method == "ping-pong" and abs(clocks[1].offset_ns) <= clocks[1].uncertainty_ns


@pytest.mark.parametrize("mode", ["host", "mismatch"])
def test_a_hang_is_named_first_with_the_late_rank(mode: str) -> None:
    s, r = reported(f"hang_{mode}")
    first = first_finding(r)
    assert first["code"] == "HANG", codes(r)
    assert r.diagnosis["verdict"]["line"].startswith("hang:")
    assert r.text.index("HANG: no rank finished") < r.text.index("Failures")
    assert "communication latency" not in r.text.split("verdict:")[-1]
    late = s.truth["late_rank"]
    assert f"rank {late}" in first["summary"] + " ".join(e["name"] for e in first["evidence"])


def test_the_host_hang_names_the_missing_rank_not_the_waiting_one() -> None:
    s = load_scenario("hang_host")
    hang = json.loads((s.run_dir / "hang.json").read_text())
    verdict = hang["verdicts"][0]
    assert verdict["kind"] == "missing" and verdict["ranks"] == [1] and verdict["waiting"] == [0]
    assert verdict["op"] == "all_reduce"
    text = (s.run_dir / "hang.txt").read_text()
    assert "rank 1 has not entered all_reduce #" in text
    assert "that rank 0 waits in for" in text


def test_independent_replicas_are_told_to_use_ddp() -> None:
    _s, r = reported("replicas")
    first = first_finding(r)
    assert first["summary"].startswith("the ranks never synchronise gradients"), codes(r)
    assert first["code"] == "INDEPENDENT_REPLICAS"
    assert any("DistributedDataParallel(model)" in remedy for remedy in first["remedies"])


def test_a_failed_rank_is_first_to_fail_and_its_steps_are_kept() -> None:
    s, r = reported("failed_rank")
    run = load_run(s.run_dir)
    assert run.meta.status == "failed"
    failed = run.meta.ranks["1"]
    assert failed.status == "failed" and failed.exit_code == 1
    assert "deliberate failure on rank 1 at step 3" in failed.error
    assert ": failed, exit code 1, 3 steps done (first to fail)" in r.text


def test_a_killed_rank_is_killed_and_its_flushed_steps_are_kept() -> None:
    s, r = reported("killed_rank")
    run = load_run(s.run_dir)
    killed = run.meta.ranks["1"]
    assert run.meta.status == "failed"
    assert killed.status == "killed" and killed.exit_code == -9
    ev = run.events
    steps = ev.step[(ev.rank == 1) & (ev.kind == Kind.STEP)].tolist()
    assert len(steps) >= 20 and steps == list(range(len(steps))), "flushed batches are kept"
    assert "killed" in r.text
