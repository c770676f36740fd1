"""``comm:fused`` (unit_fuse.py): FSDP's units merged into one, on a step model written by
hand whose answer is worked out by hand. Four units a, b, c, d of 100, 200, 400 and 800 bytes
on 2 ranks in step: each unit's all-gather in forward, its reduce-scatter in backward (d
first). The own time before a call is 0.5 ms of host work plus 2.5 µs a byte (a's all-gather
opens the step: 2 ms; a's reduce-scatter 0.75 ms); every transfer is 1 ms plus 1 µs a byte;
1 ms after the last call. The step as measured: 12.75 ms own + 11 ms of transfers + 1 ms
= 24.75 ms. Merged: the six calls that merge away give up 0.5 ms each (3 ms), the two calls
left pay 1 ms + 1.5 ms each (5 ms, against 11): 15.75 ms, 9 ms gained."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from scalescope.analyze.model.causes import apply_fix, candidate_causes
from scalescope.analyze.model.replay import predict
from scalescope.analyze.model.step_grid import StepGrid
from scalescope.analyze.model.unit_fuse import FUSED, fuse_plan, fused, line_fit

MS = 1e6
STEPS, RANKS = 3, 2
SIZES = {"a": 100, "b": 200, "c": 400, "d": 800}
TAGS = [f"unshard:{u}" for u in "abcd"] + [f"reduce_grads:{u}" for u in "dcba"]
OP_OF = {"unshard": "all_gather", "reduce_grads": "reduce_scatter"}


def own_ms(tag: str, k: int) -> float:
    if k == 0:
        return 2.0
    if k == len(TAGS) - 1:
        return 0.75
    return 0.5 + 0.0025 * SIZES[tag.split(":")[1]]


def grid_of(tags: list[str], sizes: list[int]) -> StepGrid:
    k = len(tags)
    ops = [OP_OF.get(t.split(":")[0], "all_reduce") for t in tags]
    shape = (STEPS, RANKS, k)
    work = np.broadcast_to([own_ms(t, i) * MS for i, t in enumerate(tags)], shape).copy()
    transfer = np.broadcast_to([(1.0 + 0.001 * b) * MS for b in sizes], shape).copy()
    step_ns = work.sum(axis=2) + transfer.sum(axis=2) + 1.0 * MS
    data = np.zeros((STEPS, RANKS, k + 2))
    data[:, :, 1] = 0.2 * MS
    return StepGrid(
        steps=np.arange(STEPS), ranks=np.arange(RANKS), group=np.zeros((RANKS, k), dtype=int),
        work_ns=work, blocking=np.ones(shape, dtype=bool), transfer_ns=transfer,
        prejoin_ns=np.zeros((STEPS, RANKS)), post_ns=np.full((STEPS, RANKS), 1.0 * MS),
        joins=np.zeros((STEPS, RANKS), dtype=bool), gap_ns=np.zeros((STEPS, RANKS)),
        step_ns=step_ns, samples=np.ones((STEPS, RANKS)), ops=tuple(ops),
        op_names=np.array([ops] * RANKS), nbytes=np.array([sizes] * RANKS),
        tags=np.array([tags] * RANKS), waits_with=np.full((RANKS, k), -1),
        phase_ns={"data": data},
    )  # fmt: skip


@pytest.fixture
def grid() -> StepGrid:
    return grid_of(TAGS, [SIZES[t.split(":")[1]] for t in TAGS])


def test_the_step_as_measured_replays_as_worked_out(grid):
    assert predict(grid, "as measured").mean_ms == pytest.approx(24.75)


def test_all_gathers_merge_into_the_first_and_reduce_scatters_into_the_last(grid):
    assert fuse_plan(grid).into.tolist() == [0, 0, 0, 0, 7, 7, 7, 7]


def test_a_line_fit_gives_back_the_line():
    assert line_fit(np.array([200, 400, 800]), np.array([1.0, 1.5, 2.5])) == pytest.approx(
        (0.5, 0.0025)
    )


def test_merged_units_save_the_host_work_and_the_latency_of_each_call(grid):
    merged, note = fused(grid)
    assert merged.shape == (STEPS, RANKS, 2)
    assert merged.transfer_ns[0, 0].tolist() == pytest.approx([2.5 * MS, 2.5 * MS])
    assert merged.work_ns[0, 0].tolist() == pytest.approx([2.0 * MS, 7.75 * MS])
    assert merged.nbytes[0].tolist() == [1500, 1500]
    assert merged.tags[0].tolist() == ["unshard:root", "reduce_grads:root"]
    assert merged.phase_ns["data"].shape == (STEPS, RANKS, 4)
    assert merged.phase_ns["data"][0, 0, 1] == pytest.approx(0.2 * MS)
    assert predict(merged, "fused").mean_ms == pytest.approx(15.75)
    assert note == "FSDP units merged into one: 6 fewer calls a step, 0.50 ms of host work each"


def test_the_fix_by_name_alone_and_with_hidden_transfers(grid):
    fixed, note, _ = apply_fix(grid, FUSED, {0: "vm", 1: "vm"})
    assert predict(fixed, FUSED).mean_ms == pytest.approx(15.75)
    both, note, _ = apply_fix(grid, f"{FUSED}+comm:hidden", {0: "vm", 1: "vm"})
    assert predict(both, "both").mean_ms == pytest.approx(9.75 + 1.0)
    assert note.endswith("; no transfer time")


def test_units_of_one_size_keep_their_own_time_and_their_transfers_sum():
    """One size tells neither a call's host cost nor its latency from what grows with its
    bytes: the merged calls keep both."""
    tags = [*TAGS[:3], "reduce_grads:c", "reduce_grads:b", "reduce_grads:a"]
    grid = replace(grid_of(tags, [400] * 6), work_ns=np.full((STEPS, RANKS, 6), 1.0 * MS))
    merged, note = fused(grid)
    assert merged.work_ns.sum(axis=2)[0, 0] == pytest.approx(6.0 * MS)
    assert merged.transfer_ns[0, 0].tolist() == pytest.approx([4.2 * MS, 4.2 * MS])
    assert note == "FSDP units merged into one: 4 fewer calls a step"


def test_the_default_causes_try_it_only_where_units_merge(grid):
    hosts = {0: "vm", 1: "vm"}
    assert FUSED in candidate_causes(grid, hosts)
    ddp = replace(grid, tags=np.full(grid.tags.shape, "gradients"))
    assert FUSED not in candidate_causes(ddp, hosts)
    with pytest.raises(ValueError, match="no pass has calls of two FSDP units"):
        apply_fix(ddp, FUSED, hosts)
