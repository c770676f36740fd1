"""One number per cause: a straggler's, a slow node's and exposed communication's saving is
the what-if's gain with that cause fixed, and a load imbalance beside a slow rank or node is
folded into it. On a recorded straggler run and on a synthetic run with a planted slow node
(benchmarks/synthetic_run.py), whose truth names the node."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from recorded_runs import RUNS
from run_builders import coll_row, step_row, write_run_dir

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))

from analysed import analysed  # noqa: E402

from scalescope.diagnose.engine import (  # noqa: E402
    NOT_REPLAYED,
    WITHIN_SPREAD,
    diagnose_run,
    replayed_savings,
)
from scalescope.diagnose.findings import Finding  # noqa: E402
from scalescope.events import RankMeta, RunMeta, load_run  # noqa: E402
from scalescope.events.tags import ZERO_GATHER, ZERO_REDUCE  # noqa: E402
from synthetic_run import write_run  # noqa: E402

MS = 1_000_000
PARAMS = 65_536


def by_code(findings, code: str) -> Finding:
    return next(f for f in findings if f.code == code)


def test_the_stragglers_saving_is_the_replayed_gain_of_fixing_it():
    run = load_run(RUNS / "straggler_forward_2" / "run")
    analysis = analysed(run)
    straggler = by_code(diagnose_run(run, analysis).findings, "STRAGGLER")
    fix = next(f for f in analysis.whatif.fixes if f.cause == f"rank:{straggler.rank}")
    assert straggler.saved_ms_per_step == pytest.approx(fix.gain_ms)
    assert straggler.basis == "replayed without it: began at step 12: as in steps 3-11"


def test_exposed_communication_saves_what_hiding_the_transfers_gains():
    run = load_run(RUNS / "comm_bound" / "run")
    analysis = analysed(run)
    comm = next(f for f in diagnose_run(run, analysis).findings if f.code.startswith("COMM_"))
    hidden = next(f for f in analysis.whatif.fixes if f.cause == "comm:hidden")
    assert comm.saved_ms_per_step == pytest.approx(hidden.gain_ms)
    assert comm.basis == "replayed without it: no transfer time"


@pytest.fixture(scope="module")
def slow_node(tmp_path_factory):
    path = tmp_path_factory.mktemp("synthetic") / "run"
    truth = write_run(path, 32, 60, "slow_node", seed=3)
    run = load_run(path)
    return truth, run, analysed(run)


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
    without = analysis.replaced(whatif=None)
    node = by_code(diagnose_run(run, without).findings, "NODE_STRAGGLER")
    assert node.basis == "its ranks' mean busy time per step above the other nodes' ranks' mean"


def test_an_imbalance_stays_a_warning_without_a_slow_rank_or_node():
    imbalance = Finding("LOAD_IMBALANCE", "load imbalance", "s", 20.0, 5.0, (), ())
    analysis = analysed(load_run(RUNS / "balanced" / "run"))
    assert replayed_savings([imbalance], analysis) == [imbalance]
    straggler = Finding("STRAGGLER", "straggler", "s", 20.0, 5.0, (), (), rank=1)
    folded = replayed_savings([straggler, imbalance], analysis.replaced(whatif=None))
    assert folded[1].level == "info" and folded[1].basis == "explained by STRAGGLER"


def test_input_waits_save_what_removing_the_data_phase_gains():
    run = load_run(RUNS / "input_bound" / "run")
    analysis = analysed(run)
    finding = by_code(diagnose_run(run, analysis).findings, "INPUT_BOUND")
    data = next(f for f in analysis.whatif.fixes if f.cause == "phase:data")
    assert finding.saved_ms_per_step == pytest.approx(data.gain_ms)
    assert finding.basis == "replayed without it: no data time"


def test_shared_cores_keep_their_run_queue_estimate_and_say_they_are_not_replayed():
    run = load_run(RUNS / "oversubscribed" / "run")
    analysis = analysed(run)
    finding = by_code(diagnose_run(run, analysis).findings, "OVERSUBSCRIBED")
    assert finding.basis.startswith("estimate: step time above a step that computes at")
    assert finding.basis.endswith(f"; {NOT_REPLAYED}")
    without_model = analysis.replaced(whatif=None)
    assert (
        NOT_REPLAYED
        not in by_code(diagnose_run(run, without_model).findings, "OVERSUBSCRIBED").basis
    )


# --- ZeRO's collectives, on a 2-rank run written by hand ---------------------------------------

ZERO_STEPS, ZERO_STEP_MS = 6, 20
GATHERS_MS = ((2.0, 3.0, 6.0), (9.0, 9.0, 12.0))
"""Per parameter gather: rank 0's issue, rank 1's issue (1 ms of extra compute before the
first), the completion on both: 3 ms of transfer after the last arrival each."""
REDUCE_MS = (16.0, 18.0)
"""The gradient reduction: issued by both, completed; the step ends 2 ms later."""


def zero_rows(rank: int) -> list[tuple]:
    rows = []
    for step in range(ZERO_STEPS):
        t = step * ZERO_STEP_MS
        for n, (*issues, done) in enumerate(GATHERS_MS):
            start = t + issues[rank]
            rows.append(coll_row(step, "all_gather", int(start * MS), int((t + done - start) * MS),
                                 PARAMS, 3 * step + n, tag=ZERO_GATHER))  # fmt: skip
        start, done = REDUCE_MS
        rows.append(coll_row(step, "all_reduce", int((t + start) * MS), int((done - start) * MS),
                             PARAMS, 3 * step + 2, tag=ZERO_REDUCE))  # fmt: skip
        rows.append(step_row(step, int(t * MS), ZERO_STEP_MS * MS, 4))
    return rows


def zero_run(path: Path, stage: int):
    files = {r: RankMeta(rank=r, world_size=2, hostname="vm", status="completed",
                         zero_stage=stage) for r in (0, 1)}  # fmt: skip
    meta = RunMeta(run_id="zero", command=["t.py"], script="t.py", world_size=2, warmup_steps=1,
                   hostnames=["vm"], status="completed", probe=True)  # fmt: skip
    return load_run(write_run_dir(path, meta, {r: [zero_rows(r)] for r in (0, 1)}, files))


def transfers_ms() -> tuple[float, float]:
    """The gathers' and the reduction's transfer time per step, from the table above."""
    gathers = sum(done - max(issues) for *issues, done in GATHERS_MS)
    return gathers, REDUCE_MS[1] - REDUCE_MS[0]


@pytest.mark.parametrize(
    ("stage", "code", "hidden"),
    [
        (3, "ZERO3_PARAM_GATHER", f"tag {ZERO_GATHER}"),
        (2, "ZERO_EXCHANGE", f"tag {ZERO_REDUCE},{ZERO_GATHER}"),
    ],
)
def test_zero_saves_what_hiding_its_collectives_gains(tmp_path, stage, code, hidden):
    """Hiding ZeRO's collectives (prefetch, overlap_comm) saves their transfers: stage 3's
    gathers 6 ms, not the 6.5 ms they take (rank 0 waits 0.5 ms a step on average for rank 1,
    which no hiding removes); stage 2's whole exchange 8 ms."""
    run = zero_run(tmp_path / "run", stage)
    finding = by_code(diagnose_run(run, analysed(run)).findings, code)
    gathers, reduce = transfers_ms()
    assert finding.saved_ms_per_step == pytest.approx(gathers if stage == 3 else gathers + reduce)
    assert finding.basis == f"replayed without it: no transfer time ({hidden})"
    issued_to_done = sum(done - (issues[0] + issues[1]) / 2 for *issues, done in GATHERS_MS)
    assert finding.saved_ms_per_step < issued_to_done + (reduce if stage == 2 else 0.0)


def test_a_straggler_within_its_peers_spread_saves_nothing():
    """failed_rank's rank 1 is late in forward, yet over the 2 measured steps it is no slower
    than rank 0 beyond their spread (analyze/model/peers.py): no cause, no saving."""
    run = load_run(RUNS / "failed_rank" / "run")
    analysis = analysed(run)
    straggler = by_code(diagnose_run(run, analysis).findings, "STRAGGLER")
    assert f"rank:{straggler.rank}" not in analysis.whatif.beyond_spread
    assert straggler.saved_ms_per_step == 0.0
    assert straggler.basis == WITHIN_SPREAD
