"""The report of a run analysed from its node files (analyze/scale/): a few lines for people,
and its JSON (docs/schema.md, "The report of a run from node files"). Both say where the
analysis came from; neither lists every rank."""

from __future__ import annotations

from typing import Any

import msgspec

from scalescope.analyze.scale.summary import ScaleAnalysis
from scalescope.analyze.verdict import Verdict
from scalescope.report.subjects import ScaleReport

LISTED = 5
"""Late nodes, ranks and links listed at most."""
SCHEMA = "scale_report/1"


def scale_lines(a: ScaleAnalysis, verdict: Verdict) -> list[str]:
    """The terminal report."""
    lines = [
        f"{a.path}: analysed from node files ({len(a.hosts):,} nodes, {a.world_size:,} ranks;"
        f" {a.sampled_steps} sampled steps of the node matrices; rank files of "
        f"{len(a.rank_files):,} ranks)",
        f"verdict: {verdict.line}",
        f"step: median {a.step_ms:.1f} ms over ranks; measured steps per rank "
        f"{a.rank_steps_range[0]:,}-{a.rank_steps_range[1]:,}",
    ]
    busy = a.node_busy_spread
    if busy is not None:
        lines.append("node busy ms per step: " + ", ".join(f"{k} {v:.1f}" for k, v in busy.items()))
    for n in a.late_nodes[:LISTED]:
        lines.append(f"late node {n.host} (ranks {n.ranks[0]}-{n.ranks[-1]}): busy "
                     f"+{n.excess_ms:.1f} ms per step (spread {n.sd_ms:.1f} ms), last arrival "
                     f"+{n.lateness_ms:.1f} ms")  # fmt: skip
    for r in a.late_ranks[:LISTED]:
        lines.append(f"late rank {r.ranks[0]} on {r.host}: busy +{r.excess_ms:.1f} ms per step")
    for link in a.links[:LISTED]:
        lines.append(f"slow link {' - '.join(link.hosts)} (group {link.group}, {link.op}): "
                     f"{link.transfer_ms:.2f} ms per call, {link.ratio:.1f}x its "
                     f"{link.peers} peers' {link.peer_ms:.2f} ms")  # fmt: skip
    return lines


def _cause(c: Any) -> dict[str, Any]:
    culprit = c.culprit
    return {
        "code": c.code, "bottleneck": c.bottleneck, "summary": c.summary,
        "culprit": None if culprit is None else {"kind": culprit.kind, "name": culprit.name,
                                                 "ranks": list(culprit.ranks)},
        "cost": None if c.cost is None else {"ms_per_step": c.cost.ms_per_step,
                                             "low_ms": c.cost.low_ms, "high_ms": c.cost.high_ms,
                                             "replayed": c.cost.replayed},
    }  # fmt: skip


def scale_json(a: ScaleAnalysis, verdict: Verdict) -> dict[str, Any]:
    """The report's JSON."""
    return {
        "schema": SCHEMA,
        "analysed_from": "node files",
        "run": str(a.path),
        "world_size": a.world_size,
        "nodes": len(a.hosts),
        "warmup_steps": a.warmup_steps,
        "sampled_steps": a.sampled_steps,
        "step_ms": a.step_ms,
        "rank_steps": dict(zip(("min", "max"), a.rank_steps_range, strict=True)),
        "rank_step_ms": a.rank_step_spread,
        "node_busy_ms": a.node_busy_spread,
        "late_nodes": [{"host": n.host, "ranks": list(n.ranks), "excess_ms": n.excess_ms,
                        "sd_ms": n.sd_ms, "lateness_ms": n.lateness_ms} for n in a.late_nodes],
        "late_ranks": [{"rank": r.ranks[0], "host": r.host, "excess_ms": r.excess_ms,
                        "sd_ms": r.sd_ms} for r in a.late_ranks],
        "slow_links": [{"hosts": list(x.hosts), "group": x.group, "op": x.op,
                        "size_class": x.size_class, "transfer_ms": x.transfer_ms,
                        "peer_ms": x.peer_ms, "peers": x.peers} for x in a.links],
        "rank_files": list(a.rank_files),
        "verdict": {"state": verdict.state, "line": verdict.line, "source": verdict.source,
                    "causes": [_cause(c) for c in verdict.causes]},
    }  # fmt: skip


def scale_text(report: ScaleReport) -> str:
    return "\n".join(scale_lines(report.analysis, report.verdict))


def scale_json_bytes(report: ScaleReport) -> bytes:
    data = scale_json(report.analysis, report.verdict)
    return msgspec.json.format(msgspec.json.encode(data), indent=2)
