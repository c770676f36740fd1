"""The hang watch beside task 0 through a real job's store (launch/watch/hang.py,
sources.py ``StoreSource.read``): a healthy poll reads the nodes' records and no rank's state,
a stall reads every rank once for the verdict hang.json gives from a whole read, a record that
does not open has its node's ranks read one by one, and a store without records is read as
before."""

from __future__ import annotations

import json
import time

import pytest
from store_jobs import KEY, CountingStore, job_store, publish_nodes, published_job
from torch.distributed import TCPStore

from scalescope.events.files import HANG_FILE
from scalescope.launch.channel.node_record import node_record
from scalescope.launch.channel.store import PREFIX, Channel
from scalescope.launch.metrics.endpoint import Latest
from scalescope.launch.options.groups import HangOptions
from scalescope.launch.watch import sources
from scalescope.launch.watch.hang import HangWatch
from scalescope.launch.watch.sources import StoreSource
from scalescope.report.views.hang import render_hang


def watcher(tmp_path, owner, world: int, after_s: float = 10.0) -> tuple[HangWatch, CountingStore]:
    """Task 0's watch (no slowdown watch, no metrics) on a client of ``owner``'s store."""
    store = CountingStore(TCPStore("127.0.0.1", owner.store.port, is_master=False))
    source = StoreSource(Channel(store, key=KEY, warn=None), world)
    run_dir = tmp_path / "run"
    run_dir.mkdir(exist_ok=True)
    options = HangOptions(after_s=after_s, slowdown_pct=0.0, render=render_hang)
    return HangWatch(run_dir, world, options, source), store


@pytest.fixture(autouse=True)
def no_relays_to_wait_for(monkeypatch):
    """No relay answers a flush or stacks here."""
    monkeypatch.setattr(sources, "ANSWER_WAIT_S", 0.1)


def test_a_healthy_poll_reads_the_records_and_no_ranks_state(tmp_path):
    """64 ranks on 4 nodes, rank 37 in its collective for 25 s while the others progressed
    1.5 s ago: no hang (as from every rank's state), and only the 4 records are read."""
    owner, _ = published_job(tmp_path, 64, 16, stuck=37, since_s=25.0)
    watch, store = watcher(tmp_path, owner, 64)
    for _ in range(3):
        watch.check()
    assert watch.report is None and not (watch.run_dir / HANG_FILE).exists()
    assert store.ranks_read() == [], "no rank's state"
    assert store.ranks_read(f"{PREFIX}node/") == sorted([0, 1, 2, 3] * 3), "each poll"


def test_a_stall_in_the_records_reads_every_rank_once_for_the_verdict(tmp_path):
    """No rank progressed for 25 s (rank 20 left all_reduce #40 then; the others wait in
    #41): the records say so, every rank's state is read, and hang.json names rank 20 and
    the call it has not entered, as from a whole read."""
    owner, _ = published_job(tmp_path, 64, 16, stuck=20, since_s=25.0, stall=True)
    watch, store = watcher(tmp_path, owner, 64)
    watch.check()
    assert store.ranks_read().count(20) >= 1 and set(store.ranks_read()) == set(range(64))
    report = json.loads((watch.run_dir / HANG_FILE).read_text())
    first = report["verdicts"][0]
    assert (first["kind"], first["ranks"], first["op"]) == ("missing", [20], "all_reduce")
    assert first["waiting"] == [r for r in range(64) if r != 20]
    assert 24.0 <= report["idle_s"] < 40.0 and report["hang_after_s"] == 10.0
    assert [r["rank"] for r in report["ranks"]] == list(range(64))
    store.keys.clear()
    watch.check()
    watch.check()
    assert store.ranks_read() == [], "the records did not change: the hang stands reported"


def test_records_read_before_the_threshold_wait_for_it(tmp_path):
    """The same stall with a threshold of 60 s: nothing read beyond the records, no hang."""
    owner, _ = published_job(tmp_path, 64, 16, stuck=20, since_s=25.0, stall=True)
    watch, store = watcher(tmp_path, owner, 64, after_s=60.0)
    watch.check()
    assert watch.report is None and store.ranks_read() == []


def test_a_node_record_that_does_not_open_has_its_ranks_read_one_by_one(tmp_path):
    """node1's record sealed with another key (claiming 10^6 steps): its 16 ranks' states are
    read each poll, the other nodes' not; every rank reports, and the stall found through
    them and the other records names rank 20 on node1."""
    from intruder import Intruder

    owner, _ = published_job(tmp_path, 64, 16, stuck=20, since_s=25.0, stall=True)
    forged = node_record("node1", time.time() + 60, {16: published_state(owner, 16)}, {})
    Intruder(owner.store).publish_node(1, forged)
    watch, store = watcher(tmp_path, owner, 64, after_s=60.0)
    read = watch.source.read(False)
    assert read.nodes.unknown == (1,) and not read.whole
    assert sorted(read.states) == list(range(16, 32)) == store.ranks_read()
    latest = Latest()
    latest.observe(read.states, read.nodes)
    assert latest.reporting == 64, "48 ranks by their records, 16 by their states"
    watch.options = HangOptions(after_s=10.0, slowdown_pct=0.0, render=render_hang)
    watch.check()
    report = json.loads((watch.run_dir / HANG_FILE).read_text())
    assert report["verdicts"][0]["ranks"] == [20]
    assert next(r for r in report["ranks"] if r["rank"] == 20)["host"] == "node1"


def test_without_records_every_poll_reads_every_rank_as_before(tmp_path):
    """Relays of an older scalescope publish no record: each poll reads the 32 states."""
    owner, _ = published_job(tmp_path, 32, 16, stuck=20, since_s=25.0)
    for index in range(2):
        owner.store.delete_key(f"{PREFIX}node/{index}")
    watch, store = watcher(tmp_path, owner, 32)
    read = watch.source.read(False)
    assert read.whole and sorted(read.states) == list(range(32))
    store.keys.clear()
    watch.check()
    assert store.ranks_read() == list(range(32)) and watch.report is None


def test_before_any_step_a_collective_entered_long_ago_is_a_hang(tmp_path):
    """32 ranks that did no step: 31 entered all_reduce #0 25 s ago, rank 5 never did. No
    record shows progress; their ranks longest in a collective entered it before the
    threshold, so every rank is read, and hang.json names rank 5 (as from a whole read)."""
    from scalescope.events.live_state_writer import LiveStateWriter

    owner = job_store(32)
    perf = time.perf_counter_ns()
    nodes: dict[int, dict[int, bytes]] = {}
    for rank in range(32):
        path = tmp_path / f"rank-{rank}.state"
        w = LiveStateWriter(path, 1000 + rank, time.time_ns() - perf)
        w.phase("forward", perf - 26 * 10**9)
        if rank != 5:
            w.enter("all_reduce", "0", 0, 9488, perf - 25 * 10**9)
        nodes.setdefault(rank // 16, {})[rank] = path.read_bytes()
        w.close()
    publish_nodes(owner, nodes)
    watch, store = watcher(tmp_path, owner, 32)
    watch.check()
    assert set(store.ranks_read()) == set(range(32))
    report = json.loads((watch.run_dir / HANG_FILE).read_text())
    first = report["verdicts"][0]
    assert (first["kind"], first["ranks"], first["op"]) == ("missing", [5], "all_reduce")
    assert 24.0 <= report["idle_s"] < 40.0


def published_state(owner: Channel, rank: int):
    return owner.states([rank])[rank]


def flush_asked(owner: Channel, relays: int) -> list[int]:
    """The relays whose flush request key the store holds."""
    return [i for i in range(relays) if owner.store.check([f"{PREFIX}ask/{i}/flush"])]


def test_a_slowdown_on_another_nodes_rank_asks_only_its_relay_to_flush(tmp_path, capsys):
    """At 16,384 ranks an alert's ring is on its own node: the watch asks that node's relay
    (the records say which) to have its ranks keep their steps, not every relay; an alert on
    every rank asks none."""
    from dataclasses import replace

    from scalescope.analyze.watch.slowdown_alerts import Alert
    from scalescope.launch.watch.slowdown import SlowdownWatch

    owner, _ = published_job(tmp_path, 64, 16, stuck=37, since_s=2.0)
    source = StoreSource(Channel(TCPStore("127.0.0.1", owner.store.port, is_master=False),
                                 key=KEY, warn=None), 64)  # fmt: skip
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    watch = SlowdownWatch(run_dir, lambda rank: f"node{rank // 16}", flush=source.flush)
    watch.observe(time.time(), source.states())
    onset = Alert(event="onset", id=1, subject="world", ranks=tuple(range(64)), nodes=(),
                  phase="forward", category="compute", change_pct=38.0, phase_change_pct=90.0,
                  baseline_ms=100.0, now_ms=138.0, since_step=3, detected_step=7,
                  detected_at=time.time(), message="slowdown: every rank")  # fmt: skip
    watch.raise_alert(onset)
    assert flush_asked(owner, 4) == []
    watch.raise_alert(replace(onset, id=2, subject="rank", ranks=(37,), nodes=("node2",)))
    assert flush_asked(owner, 4) == [2]
    assert "ranks 37 on other nodes asked to keep" in capsys.readouterr().err


def test_a_flush_of_ranks_on_no_record_asks_every_relay(tmp_path):
    owner, nodes = published_job(tmp_path, 64, 16, stuck=37, since_s=2.0)
    source = StoreSource(Channel(TCPStore("127.0.0.1", owner.store.port, is_master=False),
                                 key=KEY, warn=None), 64)  # fmt: skip
    states = source.states()
    assert source._relays_of({5, 40}) == {0, 2}
    source.flush({r: states[r] for r in (5, 40)}, 0.0)
    assert flush_asked(owner, 4) == [0, 2]
    assert source._relays_of({5, 64}) is None, "rank 64 is on no node's record"
