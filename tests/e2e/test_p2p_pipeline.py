"""A hand-written 3-stage pipeline (tests/e2e/scripts/p2p_pipeline.py) under ``scalescope
run``: every send and recv carries its peer and bytes, each send meets one recv, and the
stages blocked on the heavy last stage are waiting in communication, not in ``other``.
Read from its recorded run (tests/data/runs/p2p_pipeline, made by tests/data/record.py) to
keep CI in its budget; the same run live through the wrappers (a torch without group hooks)
is heavy."""

from __future__ import annotations

import collections
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from analysed import analysed  # noqa: E402
from heavy_stage import (
    BATCH,
    HIDDEN,
    MICRO,
    SLEEP_MS,
    STAGES,
    STEPS,
    WARMUP,
    assert_the_light_stages_wait_for_the_heavy_one,
)
from recorded_runs import load_scenario

from conftest import SCRIPTS, cli_env
from scalescope.analyze.layouts.p2p import pair_p2p
from scalescope.analyze.ranks.clocks import align_clocks, aligned_start_ns
from scalescope.events import Kind, Run, load_run
from scalescope.probe.install import WAY_VARIABLE


def _run(tmp: Path, env: dict[str, str]) -> Run:
    cmd = [
        sys.executable, "-m", "scalescope.cli", "run", "-n", STAGES, "--oversubscribe",
        "--warmup-steps", WARMUP, "--run-dir", tmp / "run", "--no-report",
        SCRIPTS / "p2p_pipeline.py", "--steps", STEPS, "--micro", MICRO, "--batch", BATCH,
        "--hidden", HIDDEN, "--sleep-ms", SLEEP_MS,
    ]  # fmt: skip
    proc = subprocess.run(
        list(map(str, cmd)), cwd=tmp, env=env, capture_output=True, text=True, timeout=240
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return load_run(tmp / "run")


@pytest.fixture(scope="module")
def pipeline_run():
    """The run recorded by tests/data/record.py (p2p_pipeline): the same script and
    arguments as ``_run``; the live run through the ``dist.*`` wrappers is heavy, and the
    C++ hooks' p2p rows are live in test_pipeline_run.py and test_native_hooks.py."""
    return load_run(load_scenario("p2p_pipeline").run_dir)


def _peers(rank: int) -> dict[str, set[int]]:
    """The script's chain: activations forward, gradients back, so each neighbour is both."""
    neighbours = {r for r in (rank - 1, rank + 1) if 0 <= r < STAGES}
    return {"send": neighbours, "recv": neighbours}


def test_every_send_and_recv_names_its_peer_and_its_bytes(pipeline_run):
    colls = pipeline_run.events.of_kind(Kind.COLLECTIVE)
    p2p = np.isin(colls.strings("name"), ["send", "recv"])
    rows = colls.select(p2p)
    assert len(rows) == len(colls) > 0  # the script issues nothing else
    nbytes = BATCH * HIDDEN * 4  # one float32 batch x hidden tensor a message
    assert set(rows.nbytes.tolist()) == {nbytes}
    seen = collections.Counter(
        zip(rows.rank.tolist(), rows.strings("name"), rows.peer.tolist(), strict=True)
    )
    expected = {
        (rank, op, peer): STEPS * MICRO
        for rank in range(STAGES)
        for op, peers in _peers(rank).items()
        for peer in peers
    }
    assert dict(seen) == expected
    groups = {
        (r, p): g for r, p, g in zip(rows.rank, rows.peer, rows.strings("group"), strict=True)
    }
    assert groups[(0, 1)] == groups[(1, 0)] == "0"  # the first link: the default group
    assert groups[(1, 2)] == groups[(2, 1)] != "0"  # a 2-rank group: peer 2 is group rank 1


def test_each_send_meets_one_recv_and_wait_plus_transfer_is_its_call(pipeline_run):
    events = pipeline_run.events
    sides = pair_p2p(events, align_clocks(pipeline_run))
    sends = STEPS * MICRO * 2 * (STAGES - 1)
    assert sides is not None and sides.pairs == sends and sides.unpaired == 0
    n = sides.pairs
    send, recv = slice(0, n), slice(n, 2 * n)
    assert (sides.peer[send] == sides.rank[recv]).all()
    assert (sides.peer[recv] == sides.rank[send]).all()
    assert (sides.step[send] == sides.step[recv]).all()  # GPipe: a pair within one step
    assert (sides.nbytes[send] == sides.nbytes[recv]).all()
    colls = events.of_kind(Kind.COLLECTIVE)
    issue = aligned_start_ns(colls, align_clocks(pipeline_run))
    starts = zip(colls.rank.tolist(), colls.start_ns.tolist(), strict=True)
    by_start = {key: i for i, key in enumerate(starts)}
    issued = zip(sides.rank.tolist(), sides.local_issue_ns.tolist(), strict=True)
    rows = np.array([by_start[key] for key in issued])
    assert len(set(rows.tolist())) == 2 * n  # one to one: no row in two pairs
    assert (sides.dur_ns == colls.dur_ns[rows]).all()
    later = np.maximum(issue[rows[send]], issue[rows[recv]])
    expected_wait = np.clip(np.r_[later, later] - issue[rows], 0, colls.dur_ns[rows])
    assert (sides.wait_ns == expected_wait).all()
    assert (sides.wait_ns + sides.transfer_ns == colls.dur_ns[rows]).all()
    assert (sides.transfer_ns >= 0).all()


def test_the_host_waits_on_every_send_and_recv_inside_its_call(pipeline_run):
    """The WAIT rows: one per send and recv, each inside its op's call (issue to completion,
    plus the poll of the C++ hooks' completion)."""
    events = pipeline_run.events
    waits = events.of_kind(Kind.WAIT)
    assert len(waits) == len(events.of_kind(Kind.COLLECTIVE))
    sides = pair_p2p(events, align_clocks(pipeline_run))
    found = sides.blocked_ns != sides.dur_ns
    assert found.mean() > 0.9
    slack = 2_000_000
    end = sides.local_issue_ns + sides.dur_ns
    assert (sides.blocked_start_ns >= sides.local_issue_ns).all()
    assert (sides.blocked_start_ns + sides.blocked_ns <= end + slack).all()


def test_each_link_counts_its_measured_calls_and_bytes(pipeline_run):
    """Structure only: how long the stages wait is judged on the recorded run
    (tests/recorded/test_p2p_recorded.py), where a busy moment of the machine cannot move it."""
    peers = {(p.rank, p.peer, p.op): p for p in analysed(pipeline_run).p2p.peers}
    measured = STEPS - WARMUP
    for rank in range(STAGES):
        for op, neighbours in _peers(rank).items():
            for peer in neighbours:
                link = peers[(rank, peer, op)]
                assert link.count == measured * MICRO
                assert link.nbytes == measured * MICRO * BATCH * HIDDEN * 4
                assert link.wait_ms >= 0 and link.transfer_ms >= 0


@pytest.mark.live
@pytest.mark.heavy
def test_without_group_hooks_batch_isend_irecv_is_recorded_with_its_peers(tmp_path):
    """The ``dist.*`` wrappers' path (a torch without group hooks): ``P2POp(dist.isend, ...)``
    is accepted (it was refused when it held the wrapper) and ``batch_isend_irecv``'s ops are
    recorded with their peers and completed at their wait (probe/batch_p2p.py)."""
    run = _run(tmp_path, cli_env() | {WAY_VARIABLE: "wrappers"})
    test_every_send_and_recv_names_its_peer_and_its_bytes(run)
    colls = run.events.of_kind(Kind.COLLECTIVE)
    assert (colls.dur_ns >= 0).all(), "every async send and recv completed at its wait"
    test_each_send_meets_one_recv_and_wait_plus_transfer_is_its_call(run)
    test_each_link_counts_its_measured_calls_and_bytes(run)
    assert_the_light_stages_wait_for_the_heavy_one(run)


def test_the_stages_are_inferred_from_the_chain(pipeline_run):
    """No ``torch.distributed.pipelining`` here: rank r is stage r of the chain, read from
    its sends and recvs; the heavy last stage bounds it."""
    pipe = analysed(pipeline_run).pipeline
    assert pipe is not None and pipe.schedule == "inferred"
    assert (pipe.stages, pipe.microbatches) == (STAGES, MICRO)
    assert {f.rank: f.stage for f in pipe.ranks} == {r: r for r in range(STAGES)}
    assert pipe.bound_stage == STAGES - 1
