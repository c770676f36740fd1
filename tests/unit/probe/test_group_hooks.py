"""The probe's group hooks on a real one-rank gloo group in this process: what each collective
records (op, nccl-tests bytes, group, sequence, tag, completion), whoever issues it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

from scalescope.events.schema import Kind
from scalescope.probe import group_hooks, native
from scalescope.probe.collectives import UNKNOWN_GROUP, GroupNames
from scalescope.probe.context import PROBE_TAG, tagged
from scalescope.probe.cuda_timing import CudaTimings
from scalescope.probe.group_hooks import GroupHooks
from scalescope.probe.recorder import Recorder

pytestmark = pytest.mark.skipif(not group_hooks.available(), reason="torch has no group hooks")

ALL_GATHER = getattr(dist, "all_gather_single", dist.all_gather_into_tensor)
REDUCE_SCATTER = getattr(dist, "reduce_scatter_single", dist.reduce_scatter_tensor)
"""FSDP2's calls; their older names warn on the pinned torch."""

OP, BYTES, COUNT, DTYPE, GROUP, SEQ, TAG = 2, 5, 6, 7, 8, 9, 10
"""Indices in a recorder row."""


@pytest.fixture(params=["python", "compiled"])
def hooks(request, tmp_path: Path):
    if request.param == "compiled" and native.load() is None:
        pytest.skip("the probe's C++ hooks are not built (python -m scalescope.probe.native)")
    recorder = Recorder(tmp_path / "events.arrow", 0)
    hooks = GroupHooks(recorder, GroupNames(), CudaTimings(), compiled=request.param == "compiled")
    assert (hooks.native is not None) == (request.param == "compiled")
    hooks.install()
    store = dist.FileStore(str(tmp_path / "store"), 1)  # no port to race for
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        yield hooks
    finally:
        hooks.uninstall()
        dist.destroy_process_group()
        recorder.close()


ORIGINAL_WAIT = dist.Work.wait


def rows(hooks: GroupHooks) -> list[list]:
    """The rows recorded so far, in issue order (the C++ hooks give a row when it completes)."""
    hooks.recorder.collect()
    got = [r for r in hooks.recorder.rows if r[1] == Kind.COLLECTIVE]
    return sorted(got, key=lambda r: (r[GROUP], r[SEQ]))


def completed_rows(hooks: GroupHooks, expected: int) -> list[list]:
    """The C++ hooks complete a work without a future on their own thread, just after the
    caller's wait returns: wait for it (5 s at most)."""
    deadline = time.monotonic() + 5
    while len(got := rows(hooks)) < expected and time.monotonic() < deadline:
        time.sleep(0.01)
    return got


def test_each_op_is_recorded_by_the_nccl_tests_convention(hooks) -> None:
    t = torch.ones(8)
    dist.all_reduce(t)
    dist.broadcast(t, 0)
    ALL_GATHER(torch.empty(8), t)
    REDUCE_SCATTER(torch.empty(8), t)
    dist.all_to_all_single(torch.empty(8), t)
    dist.barrier()
    got = [(r[OP], r[BYTES], r[COUNT], r[DTYPE], r[SEQ], r[TAG]) for r in completed_rows(hooks, 6)]
    assert got == [
        ("all_reduce", 32, 8, "float32", 0, "user"),
        ("broadcast", 32, 8, "float32", 1, "user"),
        ("all_gather", 32, 8, "float32", 2, "user"),
        ("reduce_scatter", 32, 8, "float32", 3, "user"),
        ("all_to_all", 32, 8, "float32", 4, "user"),
        ("barrier", 0, 0, "", 5, "user"),
    ]
    assert len({r[GROUP] for r in rows(hooks)}) == 1


def test_a_sync_call_is_complete_when_it_returns(hooks) -> None:
    dist.all_reduce(torch.ones(4))
    REDUCE_SCATTER(torch.empty(4), torch.ones(4))  # gloo: a work with no future
    got = completed_rows(hooks, 2)
    assert len(got) == 2 and all(r[4] is not None and r[4] >= 0 for r in got)


def test_an_async_and_a_functional_collective_complete(hooks) -> None:
    dist.all_reduce(torch.ones(4), async_op=True).wait()
    REDUCE_SCATTER(torch.empty(2), torch.ones(2), async_op=True).wait()  # gloo: no future
    reduced = funcol.all_reduce(torch.ones(3), "sum", dist.group.WORLD)
    assert float(funcol.wait_tensor(reduced)[0]) == 1.0
    got = completed_rows(hooks, 3)
    assert [(r[OP], r[BYTES]) for r in got] == [
        ("all_reduce", 16),
        ("reduce_scatter", 8),
        ("all_reduce", 12),
    ]
    hooks.recorder.flush()  # the futures' callbacks ran on gloo's thread by now, or at flush
    assert all(r[4] is not None for r in got)


def test_a_new_group_is_hooked_with_its_own_sequence(hooks) -> None:
    dist.all_reduce(torch.ones(2))
    sub = dist.new_group([0])
    dist.all_reduce(torch.ones(2), group=sub)
    first, second = rows(hooks)
    assert first[GROUP] != second[GROUP] and (first[SEQ], second[SEQ]) == (0, 0)


def test_the_probes_own_messages_are_not_recorded(hooks) -> None:
    with tagged(PROBE_TAG):
        dist.all_reduce(torch.ones(2))
    assert rows(hooks) == []


def test_removed_hooks_record_nothing_and_restore_wait(hooks) -> None:
    hooks.uninstall()
    hooks.recorder.flush()  # the probe's last flush, after the hooks are gone
    dist.all_reduce(torch.ones(2))
    assert rows(hooks) == [] and dist.Work.wait is ORIGINAL_WAIT


class Unreadable:
    """A group torch cannot name, or hook arguments of an op the probe does not know."""

    def __getattr__(self, name: str) -> object:
        raise RuntimeError(f"no {name}")


def test_a_group_it_cannot_name_is_unknown(hooks) -> None:
    assert hooks._label(Unreadable()) == UNKNOWN_GROUP


def test_bad_hook_input_never_raises_and_is_said_once(hooks) -> None:
    pre, post = hooks._hooks("g", 1)
    for _ in range(3):
        pre(Unreadable())
        post(Unreadable())
    assert rows(hooks) == []
    errors = hooks.recorder.errors
    assert len(errors) == 2, "each problem said once"
    assert "not recorded" in errors[0] and "no completion" in errors[1]
