"""The probe's C++ side on a real one-rank gloo group, through its hooks and through the c10d
ops it intercepts at the dispatcher: what the Python hooks would record (the shared cases run
in test_group_hooks.py under every way), plus what only the C++ side does itself: the live
state, the step, the tag of the thread, the clock, and building once or saying why not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from scalescope.events.files import live_state_path
from scalescope.events.live_state import MODEL, RUNNING, read_live_state
from scalescope.events.live_state_writer import LiveStateWriter
from scalescope.events.schema import Kind
from scalescope.probe import dispatched, group_hooks, native
from scalescope.probe.collectives import GroupNames
from scalescope.probe.context import tagged
from scalescope.probe.cuda_timing import CudaTimings
from scalescope.probe.dispatched import DispatchedCollectives
from scalescope.probe.group_hooks import GroupHooks
from scalescope.probe.recorder import Recorder

needs_built = pytest.mark.skipif(
    native.load() is None,
    reason="the probe's C++ side is not built (python -m scalescope.probe.native)",
)
STEP, START, DUR, TAG = 0, 3, 4, 10
ORIGINAL_WAIT = dist.Work.wait
CPP_WAYS = ["hooks", "dispatcher"]


def cpp_way(way: str, recorder: Recorder) -> GroupHooks | DispatchedCollectives:
    if way == "dispatcher":
        return DispatchedCollectives(recorder, GroupNames(), native.load())
    if not group_hooks.available():
        pytest.skip("torch has no group hooks")
    return GroupHooks(recorder, GroupNames(), CudaTimings())


@pytest.fixture(params=CPP_WAYS)
def probe(request, tmp_path: Path):
    """Recorder, live state and the C++ side on a one-rank group, as a rank has them."""
    recorder = Recorder(tmp_path / "events.arrow", 0)
    recorder.live = LiveStateWriter(live_state_path(tmp_path, 0), os.getpid(), 0)
    recorder.live.stage(MODEL, 1)
    hooks = cpp_way(request.param, recorder)
    hooks.install()
    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        yield recorder, hooks
    finally:
        hooks.uninstall()
        dist.destroy_process_group()
        recorder.live.close()
        recorder.close()


def collectives(recorder: Recorder) -> list[list]:
    recorder.collect()
    return [r for r in recorder.rows if r[1] == Kind.COLLECTIVE]


@needs_built
def test_the_world_group_is_seen_in_cpp(probe) -> None:
    _recorder, hooks = probe
    assert hooks.native is not None and hooks.native.active
    assert dist.Work.wait is not ORIGINAL_WAIT, "the caller's waits complete works without a future"
    kernels = dispatched.kernels()
    if isinstance(hooks, DispatchedCollectives):
        assert "allreduce_ (unboxed)" in kernels and "send (unboxed)" in kernels
        assert len(kernels) == len(dispatched.OPS), "every c10d op this torch has"
    else:
        assert kernels == [], "the hooks' way intercepts nothing"


@needs_built
def test_rows_carry_the_step_tag_and_the_callers_clock(probe) -> None:
    recorder, _hooks = probe
    before = time.perf_counter_ns()
    dist.all_reduce(torch.ones(4))
    after = time.perf_counter_ns()
    recorder.end_step(time.perf_counter_ns())
    with tagged("gradients"):
        dist.all_reduce(torch.ones(4))
    first, second = collectives(recorder)
    assert before <= first[START] <= first[START] + first[DUR] <= after
    assert (first[STEP], first[TAG]) == (0, "user")
    assert (second[STEP], second[TAG]) == (1, "gradients")


@needs_built
def test_the_live_state_follows_each_collective(probe, tmp_path: Path) -> None:
    recorder, _hooks = probe
    dist.all_reduce(torch.ones(4))
    state = read_live_state(tmp_path, 0)
    assert (state.op, state.group, state.seq, state.nbytes) == ("all_reduce", "0", 0, 16)
    assert not state.in_collective and state.left_s >= state.entered_s
    assert recorder.live.stage_now == RUNNING, "a collective outside set-up ends the start"


@needs_built
def test_the_live_totals_sum_each_collectives_time(probe, tmp_path: Path) -> None:
    """The C++ hooks raise the running total of time in collectives by each one's issue to
    completion, the durations of the rows they record."""
    recorder, _hooks = probe
    for n in (4, 64, 1024):
        dist.all_reduce(torch.ones(n))
    rows = collectives(recorder)
    totals = read_live_state(tmp_path, 0).totals
    assert totals.collective_ns == sum(r[DUR] for r in rows) > 0


@needs_built
def test_the_parameters_broadcast_leaves_the_start_stage(probe) -> None:
    recorder, _hooks = probe
    with tagged("parameters"):
        dist.broadcast(torch.ones(2), 0)
    assert recorder.live.stage_now == MODEL
    assert [r[TAG] for r in collectives(recorder)] == ["parameters"]


@needs_built
def test_removed_hooks_stop_writing_the_live_state(probe, tmp_path: Path) -> None:
    _recorder, hooks = probe
    dist.all_reduce(torch.ones(2))
    hooks.uninstall()
    dist.all_reduce(torch.ones(8))
    assert read_live_state(tmp_path, 0).nbytes == 8, "the last one the hooks saw"


def test_a_machine_that_cannot_build_says_why_once(tmp_path: Path) -> None:
    """No compiler: the launcher says it once, later runs keep the Python hooks silently."""
    env = os.environ | {native.CACHE_VARIABLE: str(tmp_path), "CXX": "/bin/false"}
    script = (
        "from scalescope.probe import native\n"
        "said = []\n"
        "print(repr(native.ensure_built(said.append)), len(said))\n"
        "print(repr(native.ensure_built(said.append)), len(said))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=240
    )
    (first, said), (second, said_again) = (line.rsplit(" ", 1) for line in done.stdout.splitlines())
    assert first != "None" and said == "2", "building, then why not"
    assert second == first and said_again == "2", "the same reason, not said again"
    assert not list(tmp_path.rglob("*.so"))


RANK_HEADER = """
import json, sys, time, torch, torch.distributed as dist
from pathlib import Path
from scalescope.events.schema import Kind
from scalescope.probe import native
from scalescope.probe.collectives import GroupNames
from scalescope.probe.cuda_timing import CudaTimings
from scalescope.probe.dispatched import DispatchedCollectives
from scalescope.probe.group_hooks import GroupHooks
from scalescope.probe.recorder import Recorder
rank, tmp, way = int(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
recorder = Recorder(tmp / f"events-{rank}.arrow", rank)
if way == "dispatcher":
    hooks = DispatchedCollectives(recorder, GroupNames(), native.load())
else:
    hooks = GroupHooks(recorder, GroupNames(), CudaTimings(), compiled=way == "cpp")
    assert (hooks.native is not None) == (way == "cpp")
hooks.install()
store = dist.FileStore(str(tmp / "store"), 2)
dist.init_process_group("gloo", store=store, rank=rank, world_size=2)
"""
"""Two gloo ranks recording through ``way`` (argv: rank, folder, way): the scripts below go on
from here and print their findings as JSON on their last line."""


def two_ranks(script: str, tmp_path, way: str) -> list:
    """Each rank's last line, parsed, once both exited 0 (``script`` after RANK_HEADER)."""
    ranks = [
        subprocess.Popen(
            [sys.executable, "-c", RANK_HEADER + script, str(rank), str(tmp_path), way],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for rank in (0, 1)
    ]
    outs = [p.communicate(timeout=120) for p in ranks]
    assert all(p.returncode == 0 for p in ranks), [err for _out, err in outs]
    return [json.loads(out.strip().splitlines()[-1]) for out, _err in outs]


P2P_RANK = """
t = torch.ones(4)
for _ in range(3):
    if rank == 0:
        dist.send(t, 1)
        dist.isend(t, 1).wait()
    else:
        dist.recv(t, 0)
        dist.irecv(t, 0).wait()
    dist.reduce_scatter_tensor(torch.empty(2), torch.ones(4))
dist.gather(t, [torch.empty(4), torch.empty(4)] if rank == 0 else None, dst=0)
dist.scatter(torch.empty(4), [t, t] if rank == 0 else None, src=0)
dist.barrier()
deadline = time.monotonic() + 5
while len(recorder.rows) < 12 and time.monotonic() < deadline:
    recorder.collect()
    time.sleep(0.01)
hooks.uninstall()
rows = [r for r in recorder.rows if r[1] == Kind.COLLECTIVE]
print(json.dumps(sorted((r[2], r[4] is not None and r[4] >= 0, r[11], r[5]) for r in rows)))
dist.destroy_process_group()
"""


@needs_built
@pytest.mark.parametrize("way", ["cpp", "python", "dispatcher"])
def test_send_recv_and_reduce_scatter_complete_without_blocking_their_caller(
    tmp_path, way: str
) -> None:
    """gloo's send/recv works have no future and consume their completion in wait: the C++
    side sees them complete without waiting for them (a second waiter would block the rank).
    Each send and recv names its peer (the other rank); no other row has one. Gather and
    scatter count one rank's part times the group, on the root and off it."""
    if way != "dispatcher" and not group_hooks.available():
        pytest.skip("torch has no group hooks")
    sent, received = two_ranks(P2P_RANK, tmp_path, way)
    for got, p2p, peer in ((sent, "send", 1), (received, "recv", 0)):
        want = [["barrier", True, -1, 0], ["gather", True, -1, 32], ["scatter", True, -1, 32]]
        want += [["reduce_scatter", True, -1, 16]] * 3 + [[p2p, True, peer, 16]] * 6
        assert got == sorted(want), "every call recorded and completed"


UNTOUCHED_RANK = """
seen = {}
out = torch.full((2,), -7.0)
work = dist.reduce_scatter_tensor(out, torch.ones(4) * (rank + 1), async_op=True)
dist.barrier()  # gloo's barrier waits for the reduce itself, not for the work's copy
time.sleep(0.3)
seen["before_wait"] = (out.tolist(), out._version)
work.wait()
seen["after_wait"] = (out.tolist(), out._version)
mine = torch.empty(2)
dist.reduce_scatter_tensor(mine, torch.ones(4))
mine.fill_(-1.0)
dist.barrier()
time.sleep(0.3)
seen["written_after"] = (mine.tolist(), mine._version)
recorder.collect()
hooks.uninstall()
recorder.collect()
rows = [r for r in recorder.rows if r[1] == Kind.COLLECTIVE and r[2] == "reduce_scatter"]
seen["completed"] = [r[4] is not None and r[4] >= 0 for r in rows]
print(json.dumps(seen))
dist.destroy_process_group()
"""


@needs_built
@pytest.mark.parametrize("way", ["cpp", "python", "dispatcher"])
def test_a_reduce_scatters_output_is_the_callers_alone(tmp_path, way: str) -> None:
    """gloo's reduce-scatter copies its result into the output in each ``Work.wait``: the
    probe never waits for it, so the output holds what the caller left there (not written
    before the caller's wait, nor again after it: no new version, which autograd would take
    for an in-place change), and the rows still complete at the caller's waits."""
    if way != "dispatcher" and not group_hooks.available():
        pytest.skip("torch has no group hooks")
    for seen in two_ranks(UNTOUCHED_RANK, tmp_path, way):
        assert seen["before_wait"] == [[-7.0, -7.0], 0], "not written before the caller waits"
        assert seen["after_wait"] == [[3.0, 3.0], 1]
        assert seen["written_after"] == [[-1.0, -1.0], 2], "not written again after its wait"
        assert seen["completed"] == [True, True]


FUNCTIONAL_RANK = """
import torch.distributed._functional_collectives as funcol
group = dist.group.WORLD
sums = []
for _ in range(3):
    part = funcol.reduce_scatter_tensor(torch.ones(4) * (rank + 1), "sum", 0, group)
    sums.append(torch.ops._c10d_functional.wait_tensor(part).tolist())
recorder.collect()
hooks.uninstall()
recorder.collect()
rows = [r for r in recorder.rows if r[1] == Kind.COLLECTIVE and r[2] == "reduce_scatter"]
print(json.dumps({"sums": sums, "completed": [r[4] is not None and r[4] >= 0 for r in rows]}))
dist.destroy_process_group()
"""


@needs_built
@pytest.mark.parametrize("way", ["cpp", "python", "dispatcher"])
def test_a_functional_reduce_scatter_completes_at_its_wait_tensor(tmp_path, way: str) -> None:
    """DTensor's and the functional collectives' reduce-scatters on gloo have no future and
    are waited through the ``wait_tensor`` op, from Python or C++, which frees the work: a
    kernel of that op at the dispatcher completes their rows (the C++ side's, or, on the
    Python hooks' way, for a machine that cannot build it, one in Python)."""
    if way != "dispatcher" and not group_hooks.available():
        pytest.skip("torch has no group hooks")
    for seen in two_ranks(FUNCTIONAL_RANK, tmp_path, way):
        assert seen["sums"] == [[3.0, 3.0]] * 3
        assert seen["completed"] == [True] * 3
