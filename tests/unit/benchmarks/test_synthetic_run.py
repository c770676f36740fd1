"""benchmarks/synthetic_run.py: its runs behave as a real job's do (collectives end together,
early ranks wait, clocks offset and drifting but alignable), its plants are where it says, and
the analysis reads them without a wait over the step."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))

from scalescope.analyze import analyze_run  # noqa: E402
from scalescope.analyze.clocks import align_clocks, aligned_start_ns  # noqa: E402
from scalescope.events import Kind, load_run  # noqa: E402
from synthetic_run import (  # noqa: E402
    BUCKETS,
    EXIT_JITTER_NS,
    MS,
    RANKS_PER_NODE,
    Plant,
    transfer_ns,
    write_run,
)

RANKS, STEPS = 16, 50
CLOCK_SLACK_NS = 30_000
"""Measured offsets are off by up to a quarter of a 30 µs uncertainty on each of two ranks,
plus 1 ppm of drift over the run's ~6 s."""


@pytest.fixture(scope="module")
def slow_node(tmp_path_factory):
    path = tmp_path_factory.mktemp("synthetic") / "run"
    truth = write_run(path, RANKS, STEPS, "slow_node", seed=3)
    return truth, load_run(path)


def collectives(run) -> dict[str, np.ndarray]:
    """Per (rank, seq) on rank 0's clock: issue, arrival (after the rank's previous
    collective), end; arrays (ranks, collectives); and nbytes per collective."""
    events = run.events
    mask = events.kind == int(Kind.COLLECTIVE)
    issue = aligned_start_ns(events, align_clocks(run))[mask]
    rank, seq, dur = events.rank[mask], events.seq[mask], events.dur_ns[mask]
    order = np.lexsort((seq, rank))
    shape = (len(np.unique(rank)), -1)
    issue, dur = issue[order].reshape(shape), dur[order].reshape(shape)
    end = issue + dur
    arrival = issue.copy()
    arrival[:, 1:] = np.maximum(issue[:, 1:], end[:, :-1])
    return {"issue": issue, "arrival": arrival, "end": end,
            "nbytes": events.nbytes[mask][order].reshape(shape)[0]}  # fmt: skip


def test_a_collective_ends_on_every_rank_together_after_the_last_arrival(slow_node):
    _, run = slow_node
    c = collectives(run)
    last = c["arrival"].max(axis=0)
    spread = c["end"].max(axis=0) - c["end"].min(axis=0)
    assert spread.max() <= EXIT_JITTER_NS + CLOCK_SLACK_NS
    least = np.array([transfer_ns(int(b), RANKS, b in BUCKETS) for b in c["nbytes"]])
    assert (c["end"].min(axis=0) - last >= 0.5 * least - CLOCK_SLACK_NS).all()


def test_ranks_that_arrive_early_wait_and_all_stay_in_step(slow_node):
    truth, run = slow_node
    c = collectives(run)
    wait = c["arrival"].max(axis=0) - c["arrival"]
    assert (wait.max(axis=0) > 1 * MS).mean() > 0.5, "most instances keep someone waiting"
    steps = run.events.kind == int(Kind.STEP)
    start = aligned_start_ns(run.events, align_clocks(run))[steps]
    last_step = run.events.step[steps] == STEPS - 1
    assert np.ptp(start[last_step]) < 0.1 * truth.step_ms * MS, "no drift apart over the run"


def test_clocks_are_offset_per_host_and_the_samples_align_them(slow_node):
    truth, run = slow_node
    other_host = np.arange(RANKS) >= RANKS_PER_NODE
    assert (np.abs(truth.clock_offset_ns[other_host]) > 1e6).all(), "hosts' clocks differ"
    assert (truth.clock_offset_ns[~other_host] == 0).all(), "one host, one clock"
    assert (truth.drift_ppm[other_host] != 0).all()
    for rank, meta in run.ranks.items():
        start = {s.when: s for s in meta.clock}.get("start")
        if rank == 0:
            assert start is None
            continue
        assert abs(start.offset_ns - truth.clock_offset_ns[rank]) <= start.uncertainty_ns


def test_the_slow_node_is_its_eight_ranks_and_they_compute_slower(slow_node):
    truth, run = slow_node
    assert truth.plant == "slow_node"
    assert len(truth.slow_ranks) == RANKS_PER_NODE
    assert {run.ranks[r].hostname for r in truth.slow_ranks} == {truth.slow_node}
    assert run.meta.hostnames == ["node000", "node001"]
    events = run.events
    backward = (events.kind == int(Kind.PHASE)) & (events.name == events.symbols.intern("backward"))
    per_rank = np.bincount(events.rank[backward], weights=events.dur_ns[backward]) / STEPS
    slow = np.isin(np.arange(RANKS), truth.slow_ranks)
    ratio = per_rank[slow].mean() / per_rank[~slow].mean()
    assert 1.2 < ratio < 1.4


def test_the_analysis_waits_match_the_truth_and_stay_under_the_step(slow_node):
    truth, run = slow_node
    cross = analyze_run(run).cross_rank
    assert cross is not None and cross.unmatched_instances == 0
    waits = np.array([w.wait_ms_per_step for w in cross.ranks])
    assert (waits < truth.step_ms).all()
    assert np.abs(waits - truth.wait_ms_per_step).max() < 1.0
    slow = np.isin(np.arange(RANKS), truth.slow_ranks)
    assert waits[~slow].min() > waits[slow].max(), "the fast ranks wait for the slow node"


def test_a_slow_link_slows_every_rank_of_the_collectives_that_cross_it_at_once(tmp_path):
    """Physical: a ring over all ranks crosses the link, so the world group's all-reduces
    transfer slower for everyone and still end together (no rank is late)."""
    truth = write_run(tmp_path / "run", 16, 12, Plant("slow_link", target=0))
    assert truth.slow_link == ("node000", "node001")
    c = collectives(load_run(tmp_path / "run"))
    spread = c["end"].max(axis=0) - c["end"].min(axis=0)
    assert spread.max() <= EXIT_JITTER_NS + CLOCK_SLACK_NS, "they still end together"
    big = c["nbytes"] == max(BUCKETS)
    transfer = (c["end"].min(axis=0) - c["arrival"].max(axis=0))[big]
    slow = transfer_ns(max(BUCKETS), 16, True, truth.factor)
    assert (transfer > 0.8 * slow).all() and (transfer < 1.2 * slow).all()


def pair_instances(run) -> dict[str, np.ndarray]:
    """The pipeline layout's send/recv rows by (group, seq) on rank 0's clock: per instance
    its two ranks, its last arrival (issue: the pair's previous instance is a step back) and
    its end (the later completion)."""
    events = run.events
    p2p = np.isin(events.name, [events.symbols.id_of("send"), events.symbols.id_of("recv")])
    issue = aligned_start_ns(events, align_clocks(run))[p2p]
    group, seq, rank = events.group[p2p], events.seq[p2p], events.rank[p2p]
    order = np.lexsort((rank, seq, group))
    shape = (-1, 2)
    end = (issue + events.dur_ns[p2p])[order].reshape(shape)
    return {"ranks": rank[order].reshape(shape), "last": issue[order].reshape(shape).max(1),
            "end": end.max(1), "group": group[order].reshape(shape)[:, 0]}  # fmt: skip


def test_the_pipeline_layout_pairs_each_rank_with_the_next_node_in_groups_of_two(tmp_path):
    truth = write_run(tmp_path / "run", 24, 12, layout="pipeline")
    run = load_run(tmp_path / "run")
    assert truth.layout == "pipeline"
    rows_per_step = np.bincount(run.events.rank) / 12
    assert (rows_per_step == 13).all()
    p = pair_instances(run)
    assert len(p["ranks"]) == 24 * 12, "one instance per pair and step, on both of its ranks"
    a, b = p["ranks"].T
    forward = (a + RANKS_PER_NODE) % 24 == b
    assert (forward | ((b + RANKS_PER_NODE) % 24 == a)).all(), "the same local rank, next node"
    sender = np.where(forward, a, b)
    labels = np.array(run.events.names(p["group"]))
    assert (labels == (1 + sender).astype(str)).all(), "each pair its own group: 1 + sender"
    analysis = analyze_run(run)
    assert analysis.cross_rank is not None and analysis.cross_rank.unmatched_instances == 0
    colls = run.events.of_kind(Kind.COLLECTIVE)
    sends, recvs = colls.where("name", "send"), colls.where("name", "recv")
    ahead = (colls.rank + RANKS_PER_NODE) % 24
    assert (colls.peer[sends] == ahead[sends]).all(), "a send goes to the next node"
    behind = (colls.peer[recvs] + RANKS_PER_NODE) % 24
    assert (behind == colls.rank[recvs]).all(), "a recv from the node before"
    assert (colls.peer[~(sends | recvs)] == -1).all()
    assert analysis.p2p is not None and analysis.p2p.unpaired == 0
    assert analysis.p2p.pairs == 24 * 12, "each send paired with its recv"


def test_a_slow_link_slows_the_pairs_between_its_two_nodes_only(tmp_path):
    truth = write_run(tmp_path / "run", 24, 12, Plant("slow_link", target=1), layout="pipeline")
    assert truth.slow_link == ("node001", "node002")
    p = pair_instances(load_run(tmp_path / "run"))
    nodes = np.sort(p["ranks"] // RANKS_PER_NODE, axis=1)
    crossing = (nodes == [1, 2]).all(axis=1)
    transfer = p["end"] - p["last"]
    assert crossing.sum() == 8 * 12
    ratio = np.median(transfer[crossing]) / np.median(transfer[~crossing])
    assert 3.5 < ratio < 4.2


def test_a_hang_leaves_the_others_in_an_unfinished_collective(tmp_path):
    truth = write_run(tmp_path / "run", 16, 20, Plant("hang", target=5, at_step=12))
    assert (truth.hang_rank, truth.hang_step, truth.steps) == (5, 12, 12)
    run = load_run(tmp_path / "run")
    events = run.events
    assert events.step[events.rank == 5].max() == 11, "the hung rank never starts step 12"
    pending = events.dur_ns < 0
    assert sorted(np.unique(events.rank[pending])) == [r for r in range(16) if r != 5]
    assert (events.kind[pending] == int(Kind.COLLECTIVE)).all()
    assert (events.step[pending] == 12).all()
    assert len(np.unique(events.seq[pending])) == 1, "all wait in the same instance"
    assert run.meta.status == "interrupted"
    assert {m.status for m in run.ranks.values()} == {"interrupted"}
