"""The probe's ways of seeing collectives on a real one-rank gloo group in this process: what
each collective records (op, nccl-tests bytes, group, sequence, tag, completion), whoever
issues it, through torch's group hooks calling Python, the C++ hooks, and the c10d ops
intercepted at the dispatcher in C++ (the way of a torch without hooks): the same rows."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

from scalescope.events.schema import Kind
from scalescope.probe import dispatched, group_hooks, native
from scalescope.probe.collectives import UNKNOWN_GROUP, GroupNames
from scalescope.probe.context import PROBE_TAG, tagged
from scalescope.probe.cuda_timing import CudaTimings
from scalescope.probe.dispatched import DispatchedCollectives
from scalescope.probe.group_hooks import GroupHooks
from scalescope.probe.recorder import Recorder

ALL_GATHER = getattr(dist, "all_gather_single", dist.all_gather_into_tensor)
REDUCE_SCATTER = getattr(dist, "reduce_scatter_single", dist.reduce_scatter_tensor)
"""FSDP2's calls; their older names warn on the pinned torch."""

OP, BYTES, COUNT, DTYPE, GROUP, SEQ, TAG = 2, 5, 6, 7, 8, 9, 10
"""Indices in a recorder row."""

WAYS = ["python", "compiled", "dispatcher"]
NOT_BUILT = "the probe's C++ side is not built (python -m scalescope.probe.native)"


def make_way(way: str, recorder: Recorder) -> GroupHooks | DispatchedCollectives:
    """The way ``way``, ready to install, or a skip where this machine cannot take it."""
    if way != "dispatcher" and not group_hooks.available():
        pytest.skip("torch has no group hooks")
    if way == "python":
        return GroupHooks(recorder, GroupNames(), CudaTimings(), compiled=False)
    module = native.load()
    if module is None:
        pytest.skip(NOT_BUILT)
    if way == "compiled":
        hooks = GroupHooks(recorder, GroupNames(), CudaTimings())
        assert hooks.native is not None
        return hooks
    return DispatchedCollectives(recorder, GroupNames(), module)


@pytest.fixture(params=WAYS)
def hooks(request, tmp_path: Path):
    recorder = Recorder(tmp_path / "events.arrow", 0)
    way = make_way(request.param, recorder)
    assert way.install() is not False
    store = dist.FileStore(str(tmp_path / "store"), 1)  # no port to race for
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        yield way
    finally:
        way.uninstall()
        dist.destroy_process_group()
        recorder.close()


ORIGINAL_WAIT = dist.Work.wait


def rows(hooks: GroupHooks | DispatchedCollectives) -> list[list]:
    """The rows recorded so far, in issue order (the C++ hooks give a row when it completes)."""
    hooks.recorder.collect()
    got = [r for r in hooks.recorder.rows if r[1] == Kind.COLLECTIVE]
    return sorted(got, key=lambda r: (r[GROUP], r[SEQ]))


def completed_rows(hooks: GroupHooks | DispatchedCollectives, expected: int) -> list[list]:
    """The C++ side completes a work without a future on its own thread, just after the
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


@pytest.mark.filterwarnings("ignore:`torch.distributed.all_reduce_coalesced`:FutureWarning")
def test_the_list_rooted_and_coalesced_ops_too(hooks) -> None:
    """Each c10d op the dispatcher's way intercepts by name (the boxed ones included) gives
    the row the hooks give."""
    t = torch.ones(8)
    dist.reduce(t, 0)
    dist.all_gather([torch.empty(8)], t)
    dist.reduce_scatter(torch.empty(8), [t])
    dist.all_to_all([torch.empty(8)], [t])
    dist.gather(t, [torch.empty(8)], 0)
    dist.scatter(torch.empty(8), [t], 0)
    dist.all_reduce_coalesced([t, torch.ones(3)])
    got = [(r[OP], r[BYTES], r[COUNT], r[DTYPE]) for r in completed_rows(hooks, 7)]
    assert got == [
        ("reduce", 32, 8, "float32"),
        ("all_gather", 32, 8, "float32"),
        ("reduce_scatter", 32, 8, "float32"),
        ("all_to_all", 32, 8, "float32"),
        ("gather", 32, 8, "float32"),
        ("scatter", 32, 8, "float32"),
        ("all_reduce", 44, 11, "float32"),
    ]


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


def test_a_collective_under_inference_mode_is_recorded(hooks) -> None:
    """Inference mode leaves out autograd's dispatch keys, not the one the dispatcher's way
    intercepts under (BackendSelect)."""
    with torch.inference_mode():
        dist.all_reduce(torch.ones(5))
    assert [(r[OP], r[BYTES]) for r in completed_rows(hooks, 1)] == [("all_reduce", 20)]


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
    assert dispatched.kernels() == [], "torch's dispatch as it was"


class Unreadable:
    """A group torch cannot name, or hook arguments of an op the probe does not know."""

    def __getattr__(self, name: str) -> object:
        raise RuntimeError(f"no {name}")


def test_a_group_it_cannot_name_is_unknown(hooks) -> None:
    assert hooks._label(Unreadable()) == UNKNOWN_GROUP


def test_bad_hook_input_never_raises_and_is_said_once(hooks) -> None:
    if not isinstance(hooks, GroupHooks) or hooks.native is not None:
        pytest.skip("the Python hooks' own arguments")
    pre, post = hooks._hooks("g", 1)
    for _ in range(3):
        pre(Unreadable())
        post(Unreadable())
    assert rows(hooks) == []
    errors = hooks.recorder.errors
    assert len(errors) == 2, "each problem said once"
    assert "not recorded" in errors[0] and "no completion" in errors[1]
