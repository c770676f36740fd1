"""A slow link: groups of ranks between two hosts (or inside one) that move their bytes
several times slower than the other groups of the same shape (analyze/ranks/links.py).

Told apart from the other "slow" findings by what is slow: a slow node or a slow rank
*arrives late* at collectives (the others wait for it: NODE_STRAGGLER, STRAGGLER), a slow
link *transfers slowly once every rank has arrived*, for all the ranks of the collective at
once. The comparison needs groups smaller than the world; a run whose collectives all span
every rank gets no finding here (a slow link then only looks like a slow network).
"""

from __future__ import annotations

from dataclasses import replace

from scalescope.analyze.comm.collectives import bus_factor
from scalescope.analyze.model.link_fix import bound_by_link
from scalescope.analyze.ranks.links import LinkAnalysis, SlowLink
from scalescope.diagnose.findings import Evidence, Finding, bottleneck, remedy, summary
from scalescope.diagnose.replayed import COMM_CODES
from scalescope.diagnose.rules_input import DiagnosisInput, mean_step, rank_times, share_pct
from scalescope.diagnose.rules_ranks import node_of_late_ranks
from scalescope.events.units import fmt_bytes_significant

WARN_SHARE_PCT = 1.0
"""A slow link is a fault, not a setting: a warning from this share of the step, else info."""
GROUPS_SHOWN = 8
LINK_EXPLAINS = 1.5
"""A late rank, node or the busiest rank at an end of a slow link whose cost is at most this
many times the link's is its consequence: it waited for the link's bytes, which its busy
time counts (the transfer is not waiting for a later rank)."""
WORLD_MIN_BYTES = 1 << 20
"""The largest collective of every rank is compared with the link when at least this big."""


def _where(link: SlowLink) -> str:
    hosts = link.hosts
    if len(hosts) == 1:
        return f"inside {hosts[0]}"
    if len(hosts) == 2:
        return f"between {hosts[0]} and {hosts[1]}"
    listed = ", ".join(hosts[:4]) + (f" and {len(hosts) - 4} more" if len(hosts) > 4 else "")
    return f"among the hosts {listed}"


def common_host(links: tuple[SlowLink, ...]) -> str | None:
    """The one host every slow link between two hosts touches, when there are two or more
    such links (its NIC or its cable rather than one path); None otherwise."""
    pairs = [set(link.hosts) for link in links if len(link.hosts) == 2]
    if len(pairs) < 2 or len(pairs) != len(links):
        return None
    shared = set.intersection(*pairs)
    return next(iter(shared)) if len(shared) == 1 else None


def _groups(link: SlowLink) -> str:
    shown = ["-".join(map(str, g)) for g in link.groups[:GROUPS_SHOWN]]
    more = link.slow_groups - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def _evidence(la: LinkAnalysis, link: SlowLink, share: float) -> tuple[Evidence, ...]:
    per_byte = 1e3 * link.transfer_us / link.nbytes
    peers_per_byte = 1e3 * link.peers_transfer_us / link.nbytes
    return (
        Evidence("hosts", ", ".join(link.hosts)),
        Evidence("its slow groups (ranks)", _groups(link)),
        Evidence(f"{link.op} of {fmt_bytes_significant(link.nbytes)}: transfer per byte "
                 "(completion - last arrival)", round(per_byte, 4), "ns/B",
                 round(la.ratio_threshold * peers_per_byte, 4), ">="),
        Evidence(f"the {link.peers} other groups' median", round(peers_per_byte, 4), "ns/B"),
        Evidence("ratio", round(link.ratio, 2), "x", la.ratio_threshold, ">="),
        Evidence("bandwidth", round(link.gbps, 2), "GB/s"),
        Evidence("the other groups'", round(link.peers_gbps, 2), "GB/s"),
        Evidence("its instances", link.instances),
        Evidence("cost", round(link.cost_ms_per_step, 2), "ms/step", None, ""),
        Evidence("share of the step", round(share, 1), "%", WARN_SHARE_PCT, ">="),
    )  # fmt: skip


def world_busbw(ctx: DiagnosisInput) -> tuple[str, float] | None:
    """The largest collective of the run (not point to point, at least WORLD_MIN_BYTES):
    what it is and its bus bandwidth once every rank has arrived (GB/s), over all ranks. A
    ring or a tree over every rank crosses the slow link too, and its bus bandwidth is that
    of its slowest link: near the slow link's own, it says the link slows it as well."""
    cr = ctx.analysis.cross_rank
    n = ctx.analysis.world_size
    if cr is None or n < 2:
        return None
    big = [w for w in cr.waits if w.op not in ("send", "recv") and w.transfer_avg_us > 0
           and w.nbytes >= WORLD_MIN_BYTES and bus_factor(w.op, n)]  # fmt: skip
    if not big:
        return None
    w = max(big, key=lambda w: w.nbytes)
    busbw = (bus_factor(w.op, n) or 0.0) * w.nbytes / (w.transfer_avg_us * 1e3)
    return f"{w.op} of {fmt_bytes_significant(w.nbytes)}", busbw


def _remedies(link: SlowLink, nic: str | None) -> tuple[str, ...]:
    if len(link.hosts) == 1:
        return (remedy("slow_link_inside", host=link.hosts[0]), remedy("slow_link_iface"))
    if nic:
        test = remedy("slow_link_nic", host=nic)
    else:
        test = remedy("slow_link_test", a=link.hosts[0], b=link.hosts[-1])
    avoid = remedy("slow_link_avoid", host=nic or link.hosts[-1])
    return (test, remedy("slow_link_iface"), avoid)


class SlowLinkRule:
    """The costliest slow link of ``analysis.links``, with its hosts, the transfer per byte
    of its groups against their peers', its cost per step and what to check."""

    name = "slow link"

    def not_judged(self, ctx: DiagnosisInput) -> tuple[str, ...]:
        return ()

    def evaluate(self, ctx: DiagnosisInput) -> Finding | None:
        la = ctx.analysis.links
        step_ms = mean_step(rank_times(ctx.analysis))
        if la is None or not la.slow or not step_ms:
            return None
        link = la.slow[0]
        nic = common_host(la.slow)
        share = share_pct(link.cost_ms_per_step, step_ms)
        words = dict(
            n=link.slow_groups, op=link.op, size=fmt_bytes_significant(link.nbytes),
            ms=link.transfer_us / 1e3, ratio=link.ratio, peers=link.peers,
            peer_ms=link.peers_transfer_us / 1e3, cost=link.cost_ms_per_step,
        )  # fmt: skip
        text = (
            summary("SLOW_LINK_HOST", host=nic, links=len(la.slow), **words)
            if nic
            else summary("SLOW_LINK", where=_where(link), **words)
        )
        others = [f"{_where(s)} ({s.ratio:.1f}x)" for s in la.slow[1:4]]
        evidence = _evidence(la, link, share)
        world = world_busbw(ctx)
        if world is not None:
            what, busbw = world
            evidence += (Evidence(f"bus bandwidth of the run's largest collective ({what}; "
                                  "a ring or tree over all ranks crosses the link too)",
                                  round(busbw, 2), "GB/s"),)  # fmt: skip
        if others:
            evidence += (Evidence("other slow links", "; ".join(others)),)
        return Finding(
            code="SLOW_LINK",
            bottleneck=bottleneck("SLOW_LINK"),
            summary=text,
            share_pct=share,
            saved_ms_per_step=link.cost_ms_per_step,
            evidence=evidence,
            remedies=_remedies(link, nic),
            level="warning" if share >= WARN_SHARE_PCT else "info",
            basis="estimate: its groups' transfer time above their peers' median per step "
            "(groups over one link counted once); the saving when those transfers are not "
            "hidden under compute, and collectives of larger groups that cross the link may "
            "lose more",
        )


def _late_host(ctx: DiagnosisInput, f: Finding) -> str | None:
    """The host of what a rank finding names: the straggler's, the late node, the busiest
    rank's (load imbalance)."""
    cr = ctx.analysis.cross_rank
    rank = f.rank
    if f.code == "NODE_STRAGGLER":
        return node_of_late_ranks(ctx, cr) if cr is not None else None
    if f.code == "LOAD_IMBALANCE" and cr is not None and cr.ranks:
        rank = max(cr.ranks, key=lambda w: w.busy_ms_per_step).rank
    meta = ctx.ranks.get(rank) if rank is not None else None
    return meta.hostname if meta is not None and meta.hostname else None


def _bound_collective(ctx: DiagnosisInput, link: SlowLink) -> str | None:
    """Why the run's exposed communication is the slow link's, when the run's largest
    collective over every rank moves its bytes at the link's pace (``bound_by_link``): its
    ring or tree crosses the link, and the link's fix (the what-if's ``link:``) speeds it up;
    None otherwise."""
    world = world_busbw(ctx)
    if world is None or not bound_by_link(world[1], link.gbps, link.peers_gbps):
        return None
    what, busbw = world
    return (
        f"explained by SLOW_LINK: the {what} over every rank moves {busbw:.1f} GB/s (bus "
        f"bandwidth), the slow link's pace ({link.gbps:.1f} GB/s), not its peers' "
        f"({link.peers_gbps:.1f} GB/s): its ring or tree crosses the link {_where(link)}"
    )


def explained_by_links(ctx: DiagnosisInput, findings: list[Finding]) -> list[Finding]:
    """A straggler, a late node or a load imbalance whose rank (or node) sits at an end of a
    slow link, costing at most LINK_EXPLAINS times what the link does, is the link's
    consequence: ``info``, without a saving, "explained by SLOW_LINK". So is exposed
    communication (COMM_*) where the run's largest collective moves its bytes at the slow
    link's pace: the link's fix is its fix (``_bound_collective``)."""
    la = ctx.analysis.links
    slow = any(f.code == "SLOW_LINK" and f.level == "warning" for f in findings)
    if la is None or not la.slow or not slow:
        return findings
    bound = _bound_collective(ctx, la.slow[0])
    out = []
    for f in findings:
        if f.code in COMM_CODES and f.level == "warning" and bound is not None:
            out.append(replace(f, level="info", saved_ms_per_step=None, basis=bound))
            continue
        host = _late_host(ctx, f) if f.code in LATE_CODES and f.level == "warning" else None
        links = [s for s in la.slow if host is not None and host in s.hosts]
        cost = sum(s.cost_ms_per_step for s in links)
        if links and (f.saved_ms_per_step or 0.0) <= LINK_EXPLAINS * cost:
            f = replace(
                f, level="info", saved_ms_per_step=None,
                basis=f"explained by SLOW_LINK: {host} is an end of the slow link "
                f"{_where(links[0])}, whose transfers cost {cost:.1f} ms per step; its ranks "
                "wait for those bytes, not for a slower rank",
            )  # fmt: skip
        out.append(f)
    return out


LATE_CODES = ("STRAGGLER", "NODE_STRAGGLER", "LOAD_IMBALANCE")
