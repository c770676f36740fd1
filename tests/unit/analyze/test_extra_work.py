"""Lateness step by step: a rank slower at every step against one late every K steps; the
period of evenly spaced steps; the grouped median against numpy's; rank-only evaluation's
time per occurrence (its span, host work between its forwards included) and the others'
wait for it, on hand-built runs."""

from __future__ import annotations

import numpy as np
import pytest
from analyze_runs import make_run, phase_row, step_row

from scalescope.analyze.steps.extra_work import extra_work, lateness_pattern, median_by, period_of
from scalescope.analyze.steps.step_slots import StepSlots, measured_slots, step_key
from scalescope.events import PHASES

STEP_MS = 100.0


def slots_of(own_ms: dict[int, np.ndarray]) -> StepSlots:
    """Ranks whose steps last ``own_ms`` each, all of it in forward (their own time)."""
    ranks = np.repeat(list(own_ms), [len(v) for v in own_ms.values()])
    steps = np.concatenate([np.arange(len(v)) for v in own_ms.values()])
    forward = np.concatenate(list(own_ms.values())) * 1e6
    keys = step_key(ranks, steps)
    phase_ns = {p: np.zeros(len(keys)) for p in PHASES}
    phase_ns["forward"] = forward
    return StepSlots(
        keys=keys, rank=ranks, dur_ns=forward.copy(), samples=np.ones(len(keys), dtype=np.int64),
        phase_ns=phase_ns, ranks=np.array(sorted(own_ms)),
    )  # fmt: skip


def noisy(n: int, seed: int) -> np.ndarray:
    return STEP_MS + np.random.default_rng(seed).normal(0, 1.0, n)


def test_a_rank_late_every_4_steps_comes_in_bursts_with_its_period() -> None:
    late = noisy(20, 1)
    late[[4, 8, 12, 16]] += 60
    pattern = lateness_pattern(slots_of({0: noisy(20, 0), 1: late, 2: noisy(20, 2)}), 1)
    assert pattern is not None and pattern.periodic
    assert pattern.late_steps == (4, 8, 12, 16) and pattern.period == 4
    assert abs(pattern.ms_per_occurrence - 60) < 4 and abs(pattern.median_excess_ms) < 2


def test_a_rank_slower_at_every_step_has_its_median_shifted_not_bursts() -> None:
    pattern = lateness_pattern(slots_of({0: noisy(20, 0), 1: noisy(20, 1) + 15}), 1)
    assert pattern is not None and not pattern.periodic and pattern.late_steps == ()
    assert abs(pattern.median_excess_ms - 15) < 2


def test_period_only_for_evenly_spaced_steps() -> None:
    assert period_of((5, 10, 15)) == 5 and period_of((20, 40)) == 20
    assert period_of((5, 10, 16)) is None and period_of((7,)) is None and period_of(()) is None


def test_median_by_matches_numpy_per_group() -> None:
    rng = np.random.default_rng(3)
    keys, values = rng.integers(0, 7, 500), rng.normal(size=500)
    uniq, medians = median_by(keys, values)
    assert uniq.tolist() == sorted(set(keys.tolist()))
    want = [np.median(values[keys == k]) for k in uniq]
    np.testing.assert_allclose(medians, want)


MS = 1_000_000
WAIT_MS, STEPS, WARMUP = 2, 9, 1
EVAL_AT = (3, 6)
BATCHES, FETCH_MS, FORWARD_MS, LOSS_MS = 10, 0.5, 3.0, 1.0
"""Rank 0's evaluation: 10 batches, each fetched (0.5 ms), run forward (3 ms) and its loss
taken outside every recorded row (1 ms): 45 ms by its own clock, 35 ms of rows."""
EVAL_MS = BATCHES * (FETCH_MS + FORWARD_MS + LOSS_MS)


def evaluation(step: int, t: float) -> list[tuple]:
    rows = []
    for _ in range(BATCHES):
        rows.append(phase_row(step, "eval", int(t), int(FETCH_MS * MS)))
        rows.append(phase_row(step, "eval", int(t + FETCH_MS * MS), int(FORWARD_MS * MS)))
        t += (FETCH_MS + FORWARD_MS + LOSS_MS) * MS
    return rows


def rank_rows(rank: int, split: bool = False) -> list[tuple]:
    """Steps of 20 ms of training (data, forward, backward) then comm_wait and the optimizer;
    rank 0 evaluates at EVAL_AT before its batch (``split``: half before, half after the
    training forward), rank 1 waits that long more in comm_wait."""
    rows, t = [], 1_000 * MS
    for s in range(STEPS):
        extra = EVAL_MS * MS if s in EVAL_AT else 0
        start, cur = t, t
        if rank == 0 and extra and not split:
            rows += evaluation(s, cur)
            cur += extra
        rows += [
            phase_row(s, "data", int(cur), 1 * MS),
            phase_row(s, "forward", int(cur + MS), 9 * MS),
        ]
        cur += 10 * MS
        if rank == 0 and extra and split:  # five batches, a 4 ms training forward, five more
            first, second = evaluation(s, cur)[:BATCHES], evaluation(s, cur + 4 * MS)[BATCHES:]
            rows += [*first, phase_row(s, "forward", int(cur + extra / 2), 4 * MS), *second]
            cur += extra + 4 * MS
        rows.append(phase_row(s, "backward", int(cur), 10 * MS))
        cur += 10 * MS
        wait = WAIT_MS * MS + (extra if rank == 1 else 0)
        rows.append(phase_row(s, "comm_wait", int(cur), int(wait)))
        cur += wait
        rows.append(phase_row(s, "optimizer", int(cur), 3 * MS))
        cur += 3 * MS
        rows.append(step_row(s, int(start), int(cur - start), 4))
        t = cur
    return rows


def _work(tmp_path, split: bool = False):
    run = make_run(
        tmp_path, {r: [rank_rows(r, split)] for r in (0, 1)}, world_size=2, warmup_steps=WARMUP
    )
    (work,) = extra_work(run.events, measured_slots(run.events, WARMUP))
    return work


def test_evaluation_time_is_its_span_with_the_loss_between_its_forwards(tmp_path) -> None:
    work = _work(tmp_path)
    assert (work.kind, work.ranks, work.others, work.steps, work.period) == (
        "eval", (0,), (1,), EVAL_AT, 3,
    )  # fmt: skip
    assert work.ms_per_occurrence == pytest.approx(EVAL_MS - LOSS_MS)  # 44: the last loss is after
    assert work.ms_per_occurrence > BATCHES * (FETCH_MS + FORWARD_MS)  # not the rows' 35 ms


def test_the_others_wait_the_evaluation_per_occurrence_and_per_step(tmp_path) -> None:
    work = _work(tmp_path)
    assert work.measured_steps == STEPS - WARMUP
    assert work.others_wait_ms_per_occurrence == pytest.approx(EVAL_MS)
    assert work.others_wait_ms_per_step == pytest.approx(EVAL_MS * len(EVAL_AT) / (STEPS - WARMUP))


def test_training_phases_inside_the_span_are_not_the_evaluation(tmp_path) -> None:
    """Half the evaluation before a 4 ms training forward, half after: 44 ms, not 48."""
    work = _work(tmp_path, split=True)
    assert work.ms_per_occurrence == pytest.approx(EVAL_MS - LOSS_MS)
