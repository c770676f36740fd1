"""The verdict of a run analysed from its node files (analyze/scale/): the same ``Verdict``
every surface renders, in the findings' own words (diagnose/findings.py).

Causes: a slow link (``SLOW_LINK``), a late node (``NODE_STRAGGLER``) and a late rank
(``STRAGGLER``), each costed by an estimate, marked as one, with the diagnosis' range
(``ESTIMATE_FACTOR``): a link by its groups' excess transfer, a node or rank by the what-if at
scale (analyze/scale/node_replay.py: its node at the median node's pace over the sampled
steps). The costliest first, two when their ranges overlap. A late node or rank at an end of
a slow link is the link's consequence (it waits for the link's bytes, which its busy time
counts; a transfer never waits for a late rank) and is folded into it. Nothing late and no
slow link: "no bottleneck".
"""

from __future__ import annotations

from scalescope.analyze.scale.late_nodes import LateNode
from scalescope.analyze.scale.node_replay import NodeGain
from scalescope.analyze.scale.slow_links import ScaleLink
from scalescope.analyze.scale.summary import ScaleAnalysis
from scalescope.analyze.verdict import Cause, Cost, Culprit, Verdict
from scalescope.diagnose.findings import bottleneck, summary
from scalescope.diagnose.verdict import ESTIMATE_FACTOR
from scalescope.events.units import fmt_bytes

SOURCE = "scalescope (node files)"


def _cost(ms: float, step_ms: float) -> Cost:
    share = 100 * ms / step_ms if step_ms > 0 else None
    return Cost(ms, ms / ESTIMATE_FACTOR, ms * ESTIMATE_FACTOR, False, share)


def link_causes(links: list[ScaleLink], step_ms: float) -> list[Cause]:
    """One cause per link (pair of hosts), its slowest group's figures."""
    by_hosts: dict[tuple[str, ...], list[ScaleLink]] = {}
    for link in links:
        by_hosts.setdefault(tuple(sorted(link.hosts)), []).append(link)
    out = []
    for hosts, groups in by_hosts.items():
        worst = max(groups, key=lambda g: g.ratio)
        cost = max(g.transfer_ms - g.peer_ms for g in groups)
        words = summary("SLOW_LINK", where=" - ".join(hosts), n=len(groups), ms=worst.transfer_ms,
                        op=worst.op, size=fmt_bytes(worst.nbytes), ratio=worst.ratio,
                        peers=worst.peers, peer_ms=worst.peer_ms, cost=cost)  # fmt: skip
        culprit = Culprit("link", ",".join(hosts))
        out.append(Cause("SLOW_LINK", bottleneck("SLOW_LINK"), words, culprit,
                         _cost(cost, step_ms)))  # fmt: skip
    return out


def _replayed(late: LateNode, gains: dict[int, NodeGain], step_ms: float) -> Cost:
    """Its node's what-if (nodes as units: node_replay.py), else its busy excess; marked an
    estimate with the diagnosis' range: the node replay missed 14 % of the full replay's gain
    at 1,024 ranks (docs/many-ranks.md), more than its interval over the steps says."""
    g = gains.get(late.node)
    return _cost(g.gain_ms if g is not None and g.gain_ms > 0 else late.excess_ms, step_ms)


def late_causes(
    nodes: list[LateNode], ranks: list[LateNode], gains: dict[int, NodeGain], step_ms: float
) -> list[Cause]:
    out = []
    for n in nodes:
        share = 100 * n.excess_ms / step_ms if step_ms > 0 else 0.0
        words = summary("NODE_STRAGGLER", host=n.host, n=len(n.ranks), share=share)
        out.append(Cause("NODE_STRAGGLER", bottleneck("NODE_STRAGGLER"), words,
                         Culprit("node", n.host, n.ranks),
                         _replayed(n, gains, step_ms)))  # fmt: skip
    for r in ranks:
        share = 100 * r.excess_ms / step_ms if step_ms > 0 else 0.0
        words = summary("STRAGGLER", rank=r.ranks[0], where=f" (on {r.host})", share=share)
        out.append(Cause("STRAGGLER", bottleneck("STRAGGLER"), words,
                         Culprit("rank", str(r.ranks[0]), r.ranks),
                         _replayed(r, gains, step_ms)))  # fmt: skip
    return out


def scale_verdict(a: ScaleAnalysis) -> Verdict:
    """The one verdict of ``a``."""
    if not (a.rank_steps > 0).any():
        return Verdict("no steps", note="no measured step in the node files", source=SOURCE)
    step = a.step_ms
    link_hosts = {h for link in a.links for h in link.hosts}
    nodes = [n for n in a.late_nodes if n.host not in link_hosts]
    ranks = [r for r in a.late_ranks if r.host not in link_hosts]
    causes = link_causes(a.links, step) + late_causes(nodes, ranks, a.gains, step)
    if not causes:
        return Verdict("no bottleneck", note="no node, rank or link slower than its peers "
                       "beyond the steps' spread (node files)", source=SOURCE)  # fmt: skip
    causes.sort(key=lambda c: -c.cost.ms_per_step)  # type: ignore[union-attr]
    top = causes[:1]
    if len(causes) > 1 and causes[1].cost.high_ms >= causes[0].cost.low_ms:  # type: ignore[union-attr]
        top = causes[:2]
    return Verdict("bottleneck", tuple(top), source=SOURCE)
