"""The what-if engine (analyze/model/step_grid.py, replay.py, whatif.py): hand-built steps whose
answer is known by hand, then the recorded runs of tests/data/runs: the replay gives back the
measured step, the planted delay added to the steps before it predicts the steps after it
(out of sample), and fixing the straggler gives back the scenario's own reference step."""

from __future__ import annotations

import json

import numpy as np
import pytest
from recorded_runs import RUNS
from stragglers import DELAY_S, FROM, REFERENCE_FROM

from scalescope.analyze.model.causes import apply_fix
from scalescope.analyze.model.fixes import with_delay
from scalescope.analyze.model.pacing import lagging_ranks, typical_transfers
from scalescope.analyze.model.peers import median_peer
from scalescope.analyze.model.replay import predict, replay
from scalescope.analyze.model.step_grid import StepGrid, blocking_of, build_grid, instances
from scalescope.analyze.model.whatif import what_if
from scalescope.analyze.summary import replayed_steps
from scalescope.events import Kind, load_run

MS = 1e6
STRAGGLERS = sorted(p.name for p in RUNS.glob("straggler_*") if p.name != "straggler_shared_core")


def grid(work_ms: list[list[float]], transfer_ms: float = 2.0, post_ms: float = 1.0,
         blocking: bool = True, steps: int = 4) -> StepGrid:  # fmt: skip
    """Ranks x collectives of own time before each collective, the same every step; one
    group; every collective blocking (or every one asynchronous, joined at the step's end)."""
    work = np.array(work_ms, dtype=float) * MS
    n_r, n_k = work.shape
    shape = (steps, n_r, n_k)
    return StepGrid(
        steps=np.arange(steps), ranks=np.arange(n_r), group=np.zeros((n_r, n_k), dtype=int),
        work_ns=np.broadcast_to(work, shape).copy(), blocking=np.full(shape, blocking),
        transfer_ns=np.full(shape, transfer_ms * MS), prejoin_ns=np.zeros((steps, n_r)),
        post_ns=np.full((steps, n_r), post_ms * MS), joins=np.full((steps, n_r), not blocking),
        gap_ns=np.zeros((steps, n_r)), step_ns=np.zeros((steps, n_r)),
        samples=np.ones((steps, n_r)),
    )  # fmt: skip


def step_ms(g: StepGrid, cause: str | None = None) -> float:
    if cause is not None:
        g, _, _ = apply_fix(g, cause, {})
    return predict(g, "x").step_ms


# --- by hand ---------------------------------------------------------------------------------


def test_a_collective_starts_at_the_last_arrival_and_ends_a_transfer_later():
    g = grid([[10.0], [30.0]])
    assert step_ms(g) == pytest.approx(30 + 2 + 1)
    played = replay(g)
    assert played.wait_ns[0] / MS == pytest.approx([22.0, 2.0])  # rank 0 waits for rank 1
    assert step_ms(g, "rank:1") == pytest.approx(10 + 2 + 1)
    assert step_ms(g, "comm:hidden") == pytest.approx(30 + 1)
    assert step_ms(g, "comm:2") == pytest.approx(30 + 1 + 1)
    assert step_ms(g, "compute:2") == pytest.approx(15 + 2 + 0.5)


def test_two_causes_compose_and_fixing_one_gains_only_down_to_the_other():
    """Ranks 0 and 1 both slow before the same collective (30 and 25 ms against rank 2's 10):
    fixing rank 0 gains 5 ms, rank 1 nothing, both together 20: not the sum of the two."""
    g = grid([[30.0], [25.0], [10.0]])
    base = step_ms(g)
    gains = [base - step_ms(g, c) for c in ("rank:0", "rank:1", "rank:0+rank:1")]
    assert gains == pytest.approx([5.0, 0.0, 20.0])


def test_causes_in_different_parts_of_the_step_add_up():
    """Rank 0 slow before the first collective, rank 1 before the second, rank 2 at pace:
    each fix gains its own 20 ms, both 40."""
    g = grid([[30.0, 10.0], [10.0, 30.0], [10.0, 10.0]])
    base = step_ms(g)
    assert base == pytest.approx(30 + 2 + 30 + 2 + 1)
    assert [base - step_ms(g, c) for c in ("rank:0", "rank:1", "rank:0+rank:1")] == (
        pytest.approx([20.0, 20.0, 40.0])
    )


def test_an_asynchronous_collective_overlaps_the_work_after_it_until_the_join():
    """Each rank issues its bucket after 10 ms and works 8 ms more: a 5-ms transfer hides
    under the work; a 12-ms one shows 4 ms of it at the join."""
    g = grid([[10.0], [10.0]], transfer_ms=5.0, blocking=False)
    g = StepGrid(**{**g.__dict__, "prejoin_ns": np.full((4, 2), 8.0 * MS)})
    assert step_ms(g) == pytest.approx(10 + 8 + 1)
    slow = StepGrid(**{**g.__dict__, "transfer_ns": np.full(g.shape, 12.0 * MS)})
    assert step_ms(slow) == pytest.approx(10 + 12 + 1)
    assert replay(slow).wait_ns[0] / MS == pytest.approx([4.0, 4.0])


def test_a_late_rank_delays_the_next_step_through_the_chain():
    """Rank 1's 20 ms after the collective (post) makes it arrive late at the next step's."""
    g = grid([[10.0], [10.0]], post_ms=1.0)
    post = g.post_ns.copy()
    post[:, 1] = 20.0 * MS
    g = StepGrid(**{**g.__dict__, "post_ns": post})
    durations = replay(g).step_ns / MS
    assert durations[1:, 0] == pytest.approx([10 + 2 + 1 + 19] * 3)  # waits 19 ms more
    assert step_ms(g, "rank:1") == pytest.approx(13.0)


def test_removing_a_phase_takes_its_time_out_of_the_part_it_lies_in():
    """Rank 1 waits 20 ms for data before the collective: with no data time, both ranks meet
    at 10 ms."""
    g = grid([[10.0], [30.0]])
    data = np.zeros((*g.shape[:2], g.shape[2] + 2))
    data[:, 1, 0] = 20.0 * MS
    g = StepGrid(**{**g.__dict__, "phase_ns": {"data": data}})
    assert step_ms(g, "phase:data") == pytest.approx(10 + 2 + 1)
    assert step_ms(g, "phase:data+comm:hidden") == pytest.approx(10 + 1)


def test_a_send_meets_its_receive_at_another_place_of_the_partners_step():
    """Three stages in a ring, each sending to the next (asynchronously) and receiving from
    the one before (blocking): rank 0's send is its first collective and rank 1's receive its
    second. Rank 0 works 10 ms before its send, the others 1 ms; 1-ms transfers. Rank 1
    receives at 10 + 1 (step 12 with its 1 ms after), rank 0 at 11 + 1 (its receive waits for
    rank 2's send, issued at 1, until rank 0 posts it at 11), rank 2 at 2 + 1."""
    g = grid([[10.0, 1.0], [1.0, 1.0], [1.0, 1.0]], transfer_ms=1.0, steps=1)
    ring = np.array([[1, 3], [2, 1], [3, 2]])  # groups {0,1}, {1,2}, {2,0}
    blocking = np.broadcast_to([False, True], g.shape).copy()
    g = StepGrid(**{**g.__dict__, "group": ring, "blocking": blocking})
    assert instances(ring).tolist() == [[0, 2], [1, 0], [2, 1]]
    assert replay(g).step_ns[0] / MS == pytest.approx([13.0, 12.0, 4.0])
    assert step_ms(g, "rank:0") == pytest.approx(4.0)


def test_exchanges_that_wait_on_each_other_are_refused_in_one_line():
    """The ring above with every send blocking: each stage waits for the next one's receive,
    which comes after its own blocking send: no order completes the step."""
    g = grid([[1.0, 1.0]] * 3, steps=1)
    ring_groups = np.array([[1, 3], [2, 1], [3, 2]])
    g = StepGrid(**{**g.__dict__, "group": ring_groups})
    with pytest.raises(ValueError, match="step 0: its collectives wait on each other"):
        replay(g)


def ring(transfer_ms: list[float]) -> StepGrid:
    """The ring above on three nodes (rank r on node r), 1 ms of work before each exchange;
    ``transfer_ms``: of the groups {0,1}, {1,2}, {2,0}."""
    g = grid([[1.0, 1.0]] * 3, steps=4)
    group = np.array([[0, 2], [1, 0], [2, 1]])
    transfer = np.broadcast_to(np.array(transfer_ms)[group] * MS, g.shape).copy()
    blocking = np.broadcast_to([False, True], g.shape).copy()
    return StepGrid(**{
        **g.__dict__, "group": group, "transfer_ns": transfer, "blocking": blocking,
        "op_names": np.array([["send", "recv"]] * 3), "nbytes": np.full((3, 2), 1024),
    })  # fmt: skip


NODES = {0: "n0", 1: "n1", 2: "n2"}


def test_a_slow_link_is_paced_by_the_groups_of_the_same_shape_over_other_links():
    g = ring([5.0, 1.0, 1.0])
    fixed, note, _ = apply_fix(g, "link:n1,n0", NODES)
    np.testing.assert_allclose(fixed.transfer_ns / MS, 1.0)
    assert note == "the link n1-n0 as fast as the others"
    assert predict(fixed, "x").step_ms == pytest.approx(step_ms(ring([1.0, 1.0, 1.0])))
    assert step_ms(g) > predict(fixed, "x").step_ms == pytest.approx(1 + 1 + 1 + 1)
    healthy, _, _ = apply_fix(g, "link:n1,n2", NODES)
    assert predict(healthy, "x").step_ms == pytest.approx(step_ms(g))


@pytest.mark.parametrize(
    ("cause", "message"),
    [
        ("link:n0,n1,n2", r"link:HOST,HOST \(two nodes\) or link:HOST"),
        ("link:n0,n9", "no rank ran on node 'n9'"),
        ("link:n0", "no group smaller than the world ran over the link 'n0'"),
    ],
)
def test_a_link_the_model_cannot_pace_is_one_line(cause, message):
    with pytest.raises(ValueError, match=message):
        apply_fix(ring([5.0, 1.0, 1.0]), cause, NODES)


def test_a_link_without_a_group_of_its_shape_elsewhere_cannot_be_paced():
    g = ring([5.0, 1.0, 1.0])
    nbytes = g.nbytes.copy()
    nbytes[0, 0] = nbytes[1, 1] = 4096  # the group over n0-n1 moves other sizes
    with pytest.raises(ValueError, match="no other group of the same shape to pace it"):
        apply_fix(StepGrid(**{**g.__dict__, "nbytes": nbytes}), "link:n0,n1", NODES)


def test_a_collective_that_one_rank_went_on_from_is_asynchronous_on_every_rank():
    """Rank 0 is slow enough to find its bucket complete each time it issues the next one;
    rank 1 went on before it completed once: the bucket is asynchronous on both (a faster
    rank 0 must not wait for it), the second collective (rank 1's own group) on rank 1 only."""
    issue = np.array([[[10.0, 20.0], [1.0, 20.0]], [[10.0, 20.0], [1.0, 3.0]]])
    done = issue + 5.0
    group = np.array([[0, 1], [0, 2]])
    joins = np.zeros((2, 2), dtype=bool)
    t1 = np.full((2, 2), 30.0)
    blocking = blocking_of(issue, done, t1, joins, group)
    assert blocking[0].tolist() == [[False, True], [False, True]]
    t1[0, 1] = 22.0  # rank 1 ends a step before its last collective completes
    assert blocking_of(issue, done, t1, joins, group)[0].tolist() == [
        [False, True], [False, False]
    ]  # fmt: skip


def test_the_ideal_step_fixes_every_slow_rank_at_once():
    """Ranks 0 and 1 slow before different collectives, rank 2 and 3 at pace: the ideal is
    both fixed together; with two ranks, the slow one does the other's work (a median over
    both would keep half of its excess)."""
    g = grid([[30.0, 10.0], [10.0, 30.0], [10.0, 10.0], [10.0, 10.0]])
    assert step_ms(g, "ideal") == pytest.approx(step_ms(g, "rank:0+rank:1"))
    assert step_ms(g, "ideal") == pytest.approx(10 + 2 + 10 + 2 + 1)
    pair = grid([[10.0], [30.0]])
    assert step_ms(pair, "ideal") == pytest.approx(10 + 2 + 1)


def with_transfers(g: StepGrid, rank: int, transfer_ms: list[float]) -> StepGrid:
    """``g`` with ``rank``'s transfers of its one collective, step by step (ms)."""
    transfer = g.transfer_ns.copy()
    transfer[:, rank, 0] = np.array(transfer_ms) * MS
    return StepGrid(**{**g.__dict__, "transfer_ns": transfer})


def test_a_rank_that_completes_its_collectives_late_completes_with_its_peers_once_fixed():
    """Rank 1 (30 ms of work against 10) completes its all-reduce 3 ms after rank 0 at every
    step, as a rank sharing its core with other processes does: fixed, it works at rank 0's
    pace and completes with it; its compute alone paced would keep the 3 ms."""
    g = with_transfers(grid([[10.0], [30.0]]), 1, [5.0] * 4)
    assert step_ms(g) == pytest.approx(30 + 5 + 1)
    assert lagging_ranks(g, np.array([1]))[0] and not lagging_ranks(g, np.array([0]))[0]
    assert step_ms(g, "rank:1") == pytest.approx(10 + 2 + 1)
    assert step_ms(g, "rank:0") == pytest.approx(30 + 5 + 1)  # rank 0 is not late: kept


def test_a_rank_late_to_complete_once_keeps_its_transfers_when_fixed():
    """Rank 1 completes late in one step of six (a one-off stall): no lag beyond the steps'
    spread, so its fix paces its compute and leaves every transfer as measured."""
    g = with_transfers(grid([[10.0], [30.0]], steps=6), 1, [2.0, 2.0, 14.0, 2.0, 2.0, 2.0])
    assert not lagging_ranks(g, np.array([1]))[0]
    fixed, _, _ = apply_fix(g, "rank:1", {})
    np.testing.assert_array_equal(fixed.transfer_ns, g.transfer_ns)
    assert fixed.work_ns[:, 1, 0] / MS == pytest.approx([10.0] * 6)


def test_a_rank_on_a_slow_links_group_is_not_late_against_its_own_group():
    """All-reduces in groups {0,1} and {2,3}, the first over a slow link (5 ms against 1 ms
    on both of its members): rank 1 completes with rank 0, so its fix keeps its transfers,
    though the other ranks' at its place of the step are faster."""
    g = grid([[1.0]] * 4, transfer_ms=1.0)
    transfer = g.transfer_ns.copy()
    transfer[:, :2] = 5.0 * MS
    g = StepGrid(**{
        **g.__dict__, "group": np.array([[0], [0], [1], [1]]), "transfer_ns": transfer,
        "op_names": np.array([["all_reduce"]] * 4), "nbytes": np.full((4, 1), 1024),
    })  # fmt: skip
    assert not lagging_ranks(g, np.array([1]))[0]
    fixed, _, _ = apply_fix(g, "rank:1", {})
    np.testing.assert_array_equal(fixed.transfer_ns, g.transfer_ns)


LAGS_MS = [[0, 0, 3, 0], [0, 0, 6, 3], [0, 0, 0, 0], [4, 0, 9, 4],
           [0, 0, 3, 0], [3, 0, 6, 3], [0, 0, 2, 0], [0, 0, 0, 0]]  # fmt: skip
"""Rank 1's lag behind rank 0 at each (step, collective) of 8 steps, as ddp-shared-core's
hogged rank lagged (seed 4903 pair 0): in some collectives of some steps, by 2-9 ms, and
never ahead: summed per step (0-17 ms) the steps spread too widely for a t-test on 8 sums
(p 0.017), though its 32 completions pass (p 0.0007)."""


def lagged(lags_ms: list[list[float]]) -> StepGrid:
    """Rank 1 (30 ms of work before each of 4 collectives, against 10) completing each
    collective ``lags_ms`` after rank 0, whose transfers take 2 ms."""
    g = grid([[10.0] * 4, [30.0] * 4], steps=len(lags_ms))
    transfer = g.transfer_ns.copy()
    transfer[:, 1] += np.array(lags_ms, dtype=float) * MS
    return StepGrid(**{**g.__dict__, "transfer_ns": transfer})


def test_a_rank_late_in_some_collectives_of_most_steps_completes_with_its_peers_once_fixed():
    """The lag is told over each completion, not each step's sum: rank 1 completes with
    rank 0 once fixed, every step at rank 0's pace (4 x (10 + 2) + 1)."""
    g = lagged(LAGS_MS)
    assert lagging_ranks(g, np.array([1]))[0]
    fixed, _, _ = apply_fix(g, "rank:1", {})
    assert fixed.transfer_ns[:, 1] / MS == pytest.approx(np.full((8, 4), 2.0))
    assert replay(fixed).step_ns / MS == pytest.approx(np.full((8, 2), 4 * 12.0 + 1))


def test_a_rank_late_and_early_by_turns_keeps_its_transfers_when_fixed():
    """Rank 1 completes after rank 0 in some collectives and before it in others (its
    transfers' jitter, which a re-run keeps): not late, its transfers stay."""
    turns = [[0, 0, 3, 0], [0, 0, -1.5, 0], [1, 0, 0, 0], [0, 0, 2, -1],
             [0, 0, -1.5, 0], [0, 1, 0, 0], [0, 0, 3, 0], [0, 0, -1.5, 0]]  # fmt: skip
    g = lagged(turns)
    assert not lagging_ranks(g, np.array([1]))[0]
    fixed, _, _ = apply_fix(g, "rank:1", {})
    np.testing.assert_array_equal(fixed.transfer_ns, g.transfer_ns)


def test_a_late_rank_is_judged_over_the_measured_steps_only():
    """Rank 1 completes 3 ms late in the four measured steps, not in the two warm-up steps:
    over the measured steps it is late and its fix completes with rank 0; over every step
    the warm-up widens the spread and its transfers would stay."""
    g = with_transfers(grid([[10.0], [30.0]], steps=6), 1, [2.0, 2.0, 5.0, 5.0, 5.0, 5.0])
    measured = np.arange(6) >= 2
    assert lagging_ranks(g, np.array([1]), measured)[0]
    assert not lagging_ranks(g, np.array([1]))[0]
    fixed, _, _ = apply_fix(g, "rank:1", {}, measured)
    assert fixed.transfer_ns[:, 1, 0] / MS == pytest.approx([2.0] * 6)


def test_the_median_peer_is_the_median_of_the_others():
    own = np.array([[5.0, 1.0, 3.0, 9.0], [1.0, 2.0, 3.0, 4.0]])
    assert median_peer(own).tolist() == [[2, 0, 0, 2], [2, 2, 1, 1]]
    assert median_peer(np.array([[7.0, 1.0]])).tolist() == [[1, 0]]


def test_the_ideal_paces_a_slow_links_groups_and_keeps_the_spread_of_the_others():
    g = ring([5.0, 1.0, 1.0])
    spread = g.transfer_ns.copy()
    spread[::2] *= 1.5  # every other step 50 % longer on every group: no fix removes that
    g = StepGrid(**{**g.__dict__, "transfer_ns": spread})
    typical = typical_transfers(g, NODES)
    np.testing.assert_allclose(typical[:, 0, 0], typical[:, 1, 1])  # the slow group {0,1}
    np.testing.assert_allclose(typical[:, 0, 0], spread[:, 1, 0])  # ... as {1,2} moves
    np.testing.assert_allclose(typical[:, 1, 0], spread[:, 1, 0])  # the others untouched


def test_the_slowdown_is_the_replay_as_measured_over_the_ideal_step():
    w = what_if(load_run(RUNS / "straggler_forward_2" / "run"))
    assert w.ideal is not None
    assert w.slowdown == pytest.approx(w.replayed.mean_ms / w.ideal.mean_ms)
    assert w.ideal.mean_ms <= min(f.prediction.mean_ms for f in w.fixes if "comm" not in f.cause)


@pytest.mark.parametrize(
    ("cause", "message"),
    [
        ("phase:lunch", "no 'lunch' phase was recorded (phases: none)"),
        ("eval", "no 'eval' phase was recorded"),
        ("rank:7", "rank 7 is not in the model (ranks 0-1)"),
        ("rank:x", "rank:N takes a rank number"),
        ("node:nowhere", "no rank ran on node 'nowhere' (nodes: none recorded)"),
        ("comm:0", "the speed-up must be positive"),
        ("comm:fast", "the speed-up must be a number"),
        ("disk:2", "unknown cause 'disk:2'"),
        ("rank:0+rank:1", "every rank would be fixed: no other rank gives the pace"),
    ],
)
def test_a_bad_cause_is_one_line(cause, message):
    with pytest.raises(ValueError, match="^[^\n]*$") as err:
        apply_fix(grid([[10.0], [30.0]]), cause, {})
    assert message in str(err.value)


# --- on the recorded runs ----------------------------------------------------------------


def scenario(name: str) -> dict:
    return json.loads((RUNS / name / "scenario.json").read_text())


def planted(name: str) -> tuple[int, str]:
    command = scenario(name)["command"]
    return int(command[command.index("--sleep-rank") + 1]), command[
        command.index("--sleep-where") + 1
    ]


WIDER_FIT = {"slowdown_rank": 0.07}
"""Runs the replay fits less closely, and by how much: four ranks on two cores whose step
changes mid-run (+6.0 % replayed against measured): a rank the OS deschedules in its own
time holds the others in a way the replay does not model."""


def test_the_replay_as_measured_gives_back_the_measured_step_on_every_recorded_run():
    replayed = 0
    for folder in sorted(p for p in RUNS.iterdir() if (p / "run").is_dir()):
        run = load_run(folder / "run")
        result = what_if(run, run.meta.warmup_steps, causes=[])
        if result is None:
            continue
        replayed += 1
        rel = WIDER_FIT.get(folder.name, 0.03)
        assert result.replayed.step_ms == pytest.approx(result.measured_step_ms, rel=rel), (
            folder.name
        )
    assert replayed >= 15


def collective_before(grid_: StepGrid, where: str) -> int:
    """Which of rank 1's own-time parts ddp_train.py's sleep lands in: data comes before DDP's
    two buffer broadcasts at the start of forward; forward's sleep (the model) and backward's
    (a hook on the output's gradient) after them, before the first gradient bucket; the
    optimizer's and the one outside the phases after the join."""
    n_k = grid_.shape[2]
    return {"data": 0, "forward": 2, "backward": 2}.get(where, n_k)


@pytest.mark.parametrize("name", STRAGGLERS)
def test_the_planted_delay_added_to_the_steps_before_predicts_the_steps_after(name):
    run = load_run(RUNS / name / "run")
    before, _ = build_grid(run, np.arange(REFERENCE_FROM, FROM))
    after, _ = build_grid(run, np.arange(FROM, 1000))
    rank, where = planted(name)
    slowed = with_delay(before, rank, DELAY_S * 1e9, collective_before(before, where))
    predicted = predict(slowed, "planted")
    measured_ms = float(np.median(np.median(after.step_ns, axis=1))) / MS
    assert predicted.step_ms == pytest.approx(measured_ms, rel=0.10)
    measured_waits = replay(after).wait_ns.mean(axis=0) / MS
    others = [i for i in range(len(after.ranks)) if i != rank]
    for i in others:  # the others wait about the delay for the slow rank, every step
        assert predicted.wait_ms_per_rank[i] == pytest.approx(measured_waits[i], rel=0.15)


SLEEPERS = [name for name in STRAGGLERS if "_spin_" not in name]
"""The spinning straggler's fix is replayed 21 % under its reference step (6.1 against 7.7 ms):
while rank 1 spins on one core its peer has the other to itself, a pace its replay keeps and
the reference steps, where both contend, lack (docs/whatif.md, "What the model leaves out")."""


@pytest.mark.parametrize("name", SLEEPERS)
def test_fixing_the_straggler_gives_back_the_scenarios_reference_step(name):
    run = load_run(RUNS / name / "run")
    rank, _ = planted(name)
    result = what_if(run, run.meta.warmup_steps, [f"rank:{rank}"])
    (fix,) = result.fixes
    assert fix.prediction.step_ms == pytest.approx(
        scenario(name)["truth"]["reference_step_ms"], rel=0.15
    )
    assert fix.note == f"began at step {FROM}: as in steps {REFERENCE_FROM}-{FROM - 1}"
    assert fix.gain_ms == pytest.approx(result.replayed.mean_ms - fix.prediction.mean_ms)


def test_the_default_causes_put_the_straggler_first_and_combine_the_top_two():
    run = load_run(RUNS / "straggler_outside_3" / "run")
    result = what_if(run, run.meta.warmup_steps)
    causes = [f.cause for f in result.fixes]
    assert causes[0] == "rank:1+comm:hidden" and "rank:1" in causes and "comm:hidden" in causes
    best = max(result.fixes, key=lambda f: f.gain_ms)
    assert best.cause == "rank:1+comm:hidden"
    single = {f.cause: f.gain_ms for f in result.fixes if "+" not in f.cause}
    assert best.gain_ms < result.replayed.mean_ms
    assert best.gain_ms >= max(single.values())


@pytest.mark.parametrize(
    ("name", "left"),
    [
        ("killed_rank", "19 step(s) some rank did not record"),
        ("replicas", "whose collectives differ between ranks"),
        ("compute_resnet50", "fewer than two ranks recorded steps"),
    ],
)
def test_runs_the_model_cannot_fully_hold_say_what_they_left_out(name, left):
    run = load_run(RUNS / name / "run")
    g, why = build_grid(run)
    assert any(left in w for w in why), why
    result = what_if(run, run.meta.warmup_steps)
    if g is None:
        assert result is None
    else:
        assert any(left in w for w in result.left_out)


def test_a_run_cut_short_by_a_hang_still_replays_its_complete_steps():
    run = load_run(RUNS / "hang_host" / "run")
    result = what_if(run, run.meta.warmup_steps)
    assert result is not None and result.steps > 0
    assert result.replayed.step_ms == pytest.approx(result.measured_step_ms, rel=0.03)


def test_a_step_recorded_twice_by_a_rank_is_counted_once(tmp_path):
    """A rank's STEP row repeated (a trace cut and merged again) neither breaks the grid nor
    stands in for another rank's missing step."""
    import dataclasses

    run = load_run(RUNS / "straggler_data_2" / "run")
    ev = run.events
    step_rows = np.flatnonzero((ev.kind == int(Kind.STEP)) & (ev.rank == 0))
    doubled = dataclasses.replace(run, events=ev.select(np.r_[np.arange(len(ev)), step_rows[:3]]))
    again = what_if(doubled, run.meta.warmup_steps, ["rank:1"])
    assert again == what_if(run, run.meta.warmup_steps, ["rank:1"])


def test_input_waits_are_a_cause_of_their_own_on_the_input_bound_run():
    run = load_run(RUNS / "input_bound" / "run")
    result = what_if(run, run.meta.warmup_steps)
    data = next(f for f in result.fixes if f.cause == "phase:data")
    assert data.note == "no data time"
    assert data.gain_ms == max(f.gain_ms for f in result.fixes if "+" not in f.cause)
    assert 0 < data.gain_ms < result.replayed.mean_ms


@pytest.mark.parametrize(("ranks", "steps"), [(2, 256), (512, 256), (1024, 128), (8192, 64)])
def test_the_report_replays_fewer_steps_of_runs_with_many_ranks(ranks, steps):
    assert replayed_steps(ranks) == steps
