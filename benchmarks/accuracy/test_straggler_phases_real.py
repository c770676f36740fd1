"""A straggler in each phase and outside every phase, on real ranks: the diagnosis names it
first with its phase, its share of step time within ``TOLERANCE`` points of the truth.

Rank 1 of the small DDP MLP (scripts/ddp_train.py) sleeps ``DELAY_S`` once per step at
``--sleep-where``: in the DataLoader (its collate function), in forward, in backward (a
hook on the output), in the optimizer step (a pre-hook), or outside every phase (after the
optimizer step, at the end of the loop's body: issue 9, where the diagnosis said "no clear
bottleneck" while rank 0 waited 93% of the step). It sleeps from step ``FROM`` on; the
steps before (after ``REFERENCE_FROM``) are the undelayed reference of the same run.

Truth, from the script's own timing of rank 0's steps (medians): the step time lost,
(delayed step - reference step) / delayed step. The sleep's own share (its real durations
over the delayed step) is printed beside it: it misses what the delay costs on top, e.g. 3
ranks on 2 cpus competing once the sleeper wakes (reported 74%, sleep's share 63% once).
With 3 ranks on 2 cpus the truth is the range between the two (``Scenario.off_truth``).
The rank and phase named first must hold under any load; the share is compared only when
other processes left the CPUs alone (else skipped with the load it saw, when it is off).
"""

import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from real_runs import MAX_EXTERNAL_PCT, ExternalLoad, diagnose_dir, skip_or_fail
from stragglers import DELAY_S, FROM, OUTSIDE, STEPS, WHERE, truth_ms

from conftest import DDP_TRAIN, figure, scalescope
from scalescope.diagnose import DEFAULT_THRESHOLDS, Diagnosis, Thresholds
from scalescope.diagnose.recording import Recording
from scalescope.events import load_run

TOLERANCE = 10.0
"""Points of step-time share the reported cost may differ from the truth."""
CPUS = len(os.sched_getaffinity(0))
"""Cpus the ranks may use: on 2 of them, 3 ranks share them (``--oversubscribe``). That
sharing is the test's, not the scenario's: such runs are diagnosed with
``max_threads_per_core`` at ranks / cpus, so the placement rule does not fire on it (with
it, the straggler is put down to the shared cores and the verdict is CPU placement)."""


@dataclass(frozen=True)
class Scenario:
    run_dir: Path
    diagnosis: Diagnosis
    slept_ms: float
    """Mean real duration of the sleeps."""
    step_ms: float
    """Rank 0's median delayed step."""
    reference_ms: float
    """Rank 0's median step before the sleeps began."""
    external_pct: float
    """Share of the CPUs other processes used during the run (real_runs.ExternalLoad)."""

    ranks: int

    @property
    def truth_pct(self) -> float:
        return 100.0 * (self.step_ms - self.reference_ms) / self.step_ms

    @property
    def sleep_pct(self) -> float:
        return 100.0 * self.slept_ms / self.step_ms

    def off_truth(self, reported_pct: float) -> float:
        """Points between the reported share and the truth. With more ranks than cpus the
        truth is the range between its two measures, each off one way: the step time lost is
        taken against reference steps that pay for 3 ranks sharing 2 cpus, which the delayed
        steps partly escape while the sleeper sleeps (lost 76%, sleep's share 83%, reported
        87% once in CI); the sleep's share misses the competition once the sleeper wakes."""
        low, high = self.truth_pct, self.truth_pct
        if self.ranks > CPUS:
            low, high = min(low, self.sleep_pct), max(high, self.sleep_pct)
        return max(low - reported_pct, reported_pct - high, 0.0)


def _record(tmp: Path, ranks: int, where: str) -> Scenario:
    """Run the scenario through the CLI and diagnose it as ``scalescope report`` does."""
    shared = ("--oversubscribe",) if ranks > CPUS else ()
    with ExternalLoad() as load:
        proc = scalescope(
            "run", "-n", ranks, *shared, "--run-dir", tmp / "run", "--warmup-steps", FROM,
            "--no-report", DDP_TRAIN, "--steps", STEPS, "--sleep-rank", 1, "--sleep-s", DELAY_S,
            "--sleep-where", where, "--sleep-from", FROM, "--sleep-log", tmp / "slept.json",
            "--step-log", tmp / "steps.json", cwd=tmp,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    thresholds = Thresholds(max_threads_per_core=ranks / CPUS) if shared else DEFAULT_THRESHOLDS
    d = diagnose_dir(tmp / "run", thresholds)
    return Scenario(tmp / "run", d, *truth_ms(tmp), load.pct, ranks)


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    """``scenario(ranks, where)``: one recorded run per pair, kept for the module."""
    runs: dict[tuple[int, str], Scenario] = {}

    def get(ranks: int, where: str) -> Scenario:
        if (ranks, where) not in runs:
            runs[ranks, where] = _record(tmp_path_factory.mktemp(f"{where}-{ranks}"), ranks, where)
        return runs[ranks, where]

    return get


SHARED_CASES = ("outside",)
"""Where rank 1 sleeps in the runs of 3 ranks on 2 cpus: outside every phase (issue 9); the
phases differ from it only in where the probe times them, which the runs of 2 ranks check
(each 3-rank run costs ~10 s; docs/diagnosis.md has all five measured
with 3 ranks)."""
CASES = [(where, 2) for where in WHERE] + [(where, 3) for where in SHARED_CASES]
"""Every phase and outside them with 2 ranks; outside them with 3 (sharing 2 cpus)."""


@pytest.mark.parametrize(("where", "ranks"), CASES)
def test_the_straggler_and_its_phase_are_named_first(scenario, where, ranks):
    s = scenario(ranks, where)
    first = s.diagnosis.findings[0]
    print(
        f"{where}, {ranks} ranks: reported {first.share_pct:.1f}%, truth {s.truth_pct:.1f}% "
        f"(steps of {s.step_ms:.0f} ms against {s.reference_ms:.0f} ms); the sleep's share "
        f"{s.sleep_pct:.1f}% ({s.slept_ms:.0f} ms)"
    )
    assert (first.code, first.rank, first.level) == ("STRAGGLER", 1, "warning"), [
        (f.code, f.summary) for f in s.diagnosis.findings
    ]
    phase, words = WHERE[where]
    assert any(e.name == f"its extra time {phase} per step" for e in first.evidence), [
        e.name for e in first.evidence
    ]
    assert first.summary.startswith(words), first.summary
    assert s.diagnosis.verdict.startswith(f"straggler: {words}")
    off = s.off_truth(first.share_pct)
    figure(f"straggler {where}, {ranks} ranks, share off its truth", off, 0.0, TOLERANCE)
    if off > TOLERANCE and s.external_pct > MAX_EXTERNAL_PCT:
        skip_or_fail(f"other processes used {s.external_pct:.0f}% of the CPUs: the truth's "
                    f"step times are theirs too ({off:.1f} points off)")  # fmt: skip
    assert off <= TOLERANCE


def test_outside_the_phases_says_where_and_what_to_look_for(scenario):
    s = scenario(2, "outside")
    first = s.diagnosis.findings[0]
    said = re.search(rf"of rank 1: (\d+) ms per step, {OUTSIDE}; the others wait", first.summary)
    assert said, first.summary
    assert float(said[1]) == pytest.approx(s.slept_ms, rel=0.15), "its extra time per step"
    assert first.remedies[0].startswith(f"look for per-step host work on rank 1 ({OUTSIDE})")
    steps = Recording.of(load_run(s.run_dir)).analysis.steps
    other = {p.phase: p.mean_ms for p in steps.ranks[1].phases}["other"]
    assert other == pytest.approx(s.slept_ms, rel=0.15), "the `other` row of rank 1 holds it"


def test_the_report_of_the_issue_no_longer_says_no_clear_bottleneck(scenario):
    """The terminal report of the run in issue 9: its verdict names the straggler."""
    s = scenario(2, "outside")
    proc = scalescope("report", s.run_dir, cwd=s.run_dir.parent)
    assert proc.returncode == 0, proc.stderr
    text = " ".join((proc.stdout + proc.stderr).split())
    assert "verdict: straggler: time outside the recorded phases of rank 1" in text
    assert "no clear bottleneck" not in text
    assert f"ms more per step outside the recorded phases (other), {OUTSIDE}, than" in text
