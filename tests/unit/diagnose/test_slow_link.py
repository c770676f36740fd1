"""SLOW_LINK on generated runs (benchmarks/synthetic_run.py, physical: collectives end
together, host clocks offset and drifting): a slow link between two nodes is named with its
hosts when pipeline pairs cross it; balanced runs, a slow node and a slow rank get no
SLOW_LINK (and keep their own findings); a run whose collectives all span every rank gets
none either (nothing to compare with). Then the rule's words on hand-built analyses."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from diagnose_inputs import analysis, make_input, rank_meta, rank_steps

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))

from analysed import analysed  # noqa: E402

from scalescope.analyze.ranks.links import LinkAnalysis, SlowLink  # noqa: E402
from scalescope.diagnose.engine import diagnose_run  # noqa: E402
from scalescope.diagnose.findings import Finding  # noqa: E402
from scalescope.diagnose.rules_links import (  # noqa: E402
    SlowLinkRule,
    common_host,
    explained_by_links,
)
from scalescope.events import load_run  # noqa: E402
from synthetic_run import ACTIVATION_BYTES, RANKS_PER_NODE, Plant, write_run  # noqa: E402

RANKS, STEPS = 32, 30
"""Four nodes of 8: the pairs cross four links, one of them slow."""


def diagnosed(path: Path, plant, ranks: int = RANKS, layout: str = "pipeline"):
    truth = write_run(path, ranks, STEPS, plant, seed=2, layout=layout)
    run = load_run(path)
    a = analysed(run)
    return truth, a, {f.code: f for f in diagnose_run(run, a).findings}


@pytest.fixture(scope="module")
def slow_link(tmp_path_factory):
    return diagnosed(tmp_path_factory.mktemp("links") / "run", Plant("slow_link", target=2))


def test_a_slow_link_is_named_with_its_two_hosts(slow_link):
    truth, a, found = slow_link
    assert truth.slow_link == ("node002", "node003")
    f = found["SLOW_LINK"]
    assert f.level == "warning"
    assert "between node002 and node003" in f.summary
    evidence = {e.name: e.value for e in f.evidence}
    assert evidence["hosts"] == "node002, node003"
    assert 3.5 <= evidence["ratio"] <= 4.3, "the planted link moves its bytes 4x slower"
    assert f.remedies[0].count("node002,node003") == 1, "nccl-tests between the two hosts"
    assert any("NCCL_IB_HCA" in r and "NCCL_SOCKET_IFNAME" in r for r in f.remedies)
    # its groups' own cost: 3 extra transfers of the activations per step (side by side)
    extra_ms = (truth.factor - 1) * ACTIVATION_BYTES / 12.5 / 1e6
    assert evidence["cost"] == pytest.approx(extra_ms, rel=0.15)
    assert f.share_pct == pytest.approx(100 * evidence["cost"] / truth.step_ms, rel=0.1)


def test_the_links_saving_is_replayed_and_the_verdict_names_it(slow_link, tmp_path):
    """The saving is the what-if's fix of the link, the all-reduces over every rank that
    cross it included: what the same run regenerated without the plant gains (within 20 %);
    the exposed communication those all-reduces leave is the link's, not a cause beside it."""
    truth, a, found = slow_link
    clean = write_run(tmp_path / "clean", RANKS, STEPS, None, seed=2, layout="pipeline")
    f = found["SLOW_LINK"]
    assert f.basis.startswith("replayed without it: the link node002-node003")
    assert f.saved_ms_per_step == pytest.approx(truth.step_ms - clean.step_ms, rel=0.2)
    comm = [g for code, g in found.items() if code.startswith("COMM_")]
    assert comm and all(g.level == "info" and g.saved_ms_per_step is None for g in comm)
    assert all(g.basis.startswith("explained by SLOW_LINK") for g in comm)
    culprit = diagnose_run(a.run, a).verdict.culprit
    assert culprit is not None and culprit.words == "link node002,node003"


def test_the_link_s_groups_are_the_pairs_between_its_nodes(slow_link):
    _, a, _ = slow_link
    assert a.links is not None and a.links.compared_groups == RANKS
    (link,) = a.links.slow
    assert link.slow_groups == RANKS_PER_NODE and link.op == "send"
    assert {tuple(r // RANKS_PER_NODE for r in g) for g in link.groups} == {(2, 3)}
    assert link.peers == RANKS - 1 and link.gbps < link.peers_gbps / 3


def test_a_slow_link_makes_no_rank_or_node_late(slow_link):
    _, _, found = slow_link
    assert not {"STRAGGLER", "NODE_STRAGGLER", "LOAD_IMBALANCE"} & set(found)


@pytest.mark.parametrize(
    ("plant", "expected"),
    [(None, None), ("slow_node", "NODE_STRAGGLER"), ("slow_rank", "STRAGGLER")],
)
def test_no_slow_link_on_a_balanced_run_a_slow_node_or_a_slow_rank(tmp_path, plant, expected):
    truth, a, found = diagnosed(tmp_path / "run", plant)
    assert "SLOW_LINK" not in found
    assert a.links is not None and a.links.compared_groups == RANKS and a.links.slow == ()
    if expected is not None:
        assert expected in found, "the plant keeps its own finding"
    if truth.slow_node is not None:
        assert truth.slow_node in found[expected].summary


def test_without_groups_smaller_than_the_world_no_link_is_named(tmp_path):
    """Plain DDP: the slow link slows the world's ring for every rank at once; nothing to
    compare it with, so no slow link (only a slower network) is reported."""
    _, a, found = diagnosed(tmp_path / "run", Plant("slow_link", target=1), layout="ddp")
    assert a.links is None
    assert "SLOW_LINK" not in found
    assert not {"STRAGGLER", "NODE_STRAGGLER"} & set(found)


def test_on_two_nodes_every_pair_crosses_the_link_and_none_is_named(tmp_path):
    _, a, found = diagnosed(tmp_path / "run", Plant("slow_link", target=0), ranks=16)
    assert a.links is not None and a.links.slow == ()
    assert "SLOW_LINK" not in found


# --- the rule's words, on hand-built analyses ------------------------------------------------


def link(hosts: tuple[str, ...], cost_ms: float = 4.0, ratio: float = 4.0) -> SlowLink:
    return SlowLink(
        hosts=hosts, groups=((0, 8), (1, 9)), slow_groups=2, op="send", nbytes=16 << 20,
        instances=50, transfer_us=5400.0, peers_transfer_us=5400.0 / ratio, ratio=ratio,
        gbps=3.1, peers_gbps=12.4, peers=30, cost_ms_per_step=cost_ms,
    )  # fmt: skip


def context(*links: SlowLink):
    a = analysis([rank_steps(0, forward=40.0), rank_steps(1, forward=40.0)])
    hosts = {0: rank_meta(0, [0], 1, host="node001"), 1: rank_meta(1, [1], 1, host="node009")}
    return make_input(a.replaced(links=LinkAnalysis(32, 1, links)), ranks=hosts)


def test_links_that_all_touch_one_host_name_the_host():
    links = (link(("node001", "node002")), link(("node002", "node003"), 3.0))
    assert common_host(links) == "node002"
    f = SlowLinkRule().evaluate(context(*links))
    assert f is not None and f.summary.startswith("the links of node002 are slow")
    assert "node002" in f.remedies[0] and "--exclude node002" in f.remedies[2]


def test_a_slow_link_inside_a_host_and_a_cheap_one():
    f = SlowLinkRule().evaluate(context(link(("node004",), cost_ms=0.5)))
    assert f is not None and "inside node004" in f.summary
    assert f.level == "info", "0.5 ms of a 100 ms step: below 1 %"
    assert "nvidia-smi topo -m" in f.remedies[0]


def test_no_link_analysis_or_no_slow_link_no_finding():
    assert SlowLinkRule().evaluate(context()) is None
    a = analysis([rank_steps(0, forward=40.0), rank_steps(1, forward=40.0)])
    assert SlowLinkRule().evaluate(make_input(a)) is None


def straggler(rank: int, cost_ms: float) -> Finding:
    return Finding("STRAGGLER", "straggler", f"rank {rank} is late", 5.0, cost_ms, (), (),
                   rank=rank)  # fmt: skip


@pytest.mark.parametrize(
    ("rank", "cost_ms", "explained"),
    [(0, 5.0, True), (0, 9.0, False), (1, 5.0, False)],
    ids=["at-the-link", "costs-more-than-the-link", "elsewhere"],
)
def test_a_straggler_at_an_end_of_the_link_is_its_consequence(rank, cost_ms, explained):
    """Rank 0 is on node001, an end of the 4 ms link; rank 1 on node009 is not."""
    ctx = context(link(("node001", "node002")))
    slow = SlowLinkRule().evaluate(ctx)
    late = explained_by_links(ctx, [slow, straggler(rank, cost_ms)])[1]
    assert (late.level == "info") is explained
    assert ("explained by SLOW_LINK" in late.basis) is explained
    assert (late.saved_ms_per_step is None) is explained


def test_exposed_communication_stays_a_cause_where_no_collective_moves_at_the_links_pace():
    """No collective over every rank was matched here (no cross-rank analysis): nothing says
    that the link bound it, and the exposed communication keeps its own saving."""
    ctx = context(link(("node001", "node002")))
    comm = Finding("COMM_BANDWIDTH", "communication bandwidth", "exposed", 13.0, 16.0, (), ())
    kept = explained_by_links(ctx, [SlowLinkRule().evaluate(ctx), comm])[1]
    assert kept.level == "warning" and kept.saved_ms_per_step == 16.0
