"""Tensor parallelism: its collectives' share of the step, and groups that span hosts.

A tensor-parallel group is one a ``DeviceMesh`` named ``tp`` (analyze/ranks/groups.py). Its
collectives sit inside every layer: the next op needs their result, so unless they are
overlapped (async tensor parallelism on CUDA streams) the step waits for each. On a backend
whose collectives block the host (gloo) nothing could overlap them, so their share is
reported as information, never called exposed. What each finding's fix buys is the replay's
(diagnose/engine.py ``SCOPED_CAUSES``): the tp collectives hidden, or over a faster link.
"""

from __future__ import annotations

from dataclasses import dataclass

from scalescope.analyze.ranks.groups import DimTotals, ProcessGroup
from scalescope.diagnose.findings import Evidence, Finding, bottleneck, remedy, summary
from scalescope.diagnose.rules_input import DiagnosisInput, mean_step, rank_times, share_pct

TP_DIMS = ("tp",)
STREAM_BACKENDS = ("nccl", "xccl", "hccl")
"""Backends whose collectives run on device streams, where compute could overlap them."""


@dataclass(frozen=True)
class TpComm:
    groups: tuple[ProcessGroup, ...]
    totals: DimTotals
    steps: float
    """Measured steps per rank, mean over ranks."""
    step_ms: float

    @property
    def ms_per_step(self) -> float:
        return self.totals.ms_per_rank / self.steps

    @property
    def ranks(self) -> int:
        return len({r for g in self.groups for r in g.ranks})

    @property
    def share(self) -> float:
        return share_pct(self.ms_per_step, self.step_ms)

    @property
    def on_streams(self) -> bool:
        return any(b in g.backend for g in self.groups for b in STREAM_BACKENDS)


def tp_comm(ctx: DiagnosisInput) -> TpComm | None:
    """The tensor-parallel groups and their collectives per measured step; None without
    a named tp dimension that issued collectives in measured steps."""
    a = ctx.analysis
    groups = tuple(g for g in a.groups if g.named and g.dim in TP_DIMS)
    totals = next((d for d in a.dims if d.named and d.dim in TP_DIMS), None)
    times = rank_times(a)
    step_ms = mean_step(times)
    if not groups or totals is None or not step_ms or a.steps is None:
        return None
    steps = [r.num_steps for r in a.steps.ranks if r.num_steps]
    if not steps:
        return None
    return TpComm(groups, totals, sum(steps) / len(steps), step_ms)


def _evidence(tp: TpComm, threshold: float | None, comparison: str) -> list[Evidence]:
    calls = tp.totals.calls / tp.steps / max(tp.ranks, 1)
    return [
        Evidence("tensor-parallel collectives", round(tp.share, 1), "% of step time",
                 threshold, comparison),
        Evidence("their time per step", round(tp.ms_per_step, 2), "ms"),
        Evidence("calls per step and rank", round(calls, 1)),
        Evidence("bytes per step and rank", round(tp.totals.bytes_per_rank / tp.steps / 1e6, 3),
                 "MB"),
        Evidence("tp groups", f"{len(tp.groups)} of {tp.totals.ranks_per_group} ranks"),
        Evidence("backend", ", ".join(sorted({g.backend or "unknown" for g in tp.groups}))),
    ]  # fmt: skip


class TpCommRule:
    """Tensor-parallel collectives' share of the step: a warning on stream backends above
    ``exposed_comm_share_pct`` (nothing in scalescope's record says they overlapped); on
    host-blocking backends, information with the share."""

    name = "tensor-parallel communication"

    def not_judged(self, ctx: DiagnosisInput) -> tuple[str, ...]:
        return ()

    def evaluate(self, ctx: DiagnosisInput) -> Finding | None:
        tp = tp_comm(ctx)
        if tp is None or tp.ms_per_step <= 0:
            return None
        limit = ctx.thresholds.exposed_comm_share_pct
        if tp.on_streams and tp.share >= limit:
            return Finding(
                code="TP_COMM_EXPOSED", bottleneck=bottleneck("TP_COMM_EXPOSED"),
                summary=summary("TP_COMM_EXPOSED", share=tp.share, ms=tp.ms_per_step),
                share_pct=tp.share, saved_ms_per_step=None,
                evidence=tuple(_evidence(tp, limit, ">=")),
                remedies=(remedy("tp_async"), remedy("tp_smaller")),
                basis="the tp collectives' issue-to-completion time per step; how much of it "
                "compute could hide is not measured",
            )  # fmt: skip
        return Finding(
            code="TP_COMM", bottleneck=bottleneck("TP_COMM"),
            summary=summary("TP_COMM", share=tp.share, ms=tp.ms_per_step,
                            why=_not_judged_why(tp)),
            share_pct=tp.share, saved_ms_per_step=None,
            evidence=tuple(_evidence(tp, None, "")),
            remedies=(remedy("tp_smaller"),), level="info",
        )  # fmt: skip


def _not_judged_why(tp: TpComm) -> str:
    if tp.on_streams:
        return "below the exposed-communication threshold"
    return "their backend blocks the host, so no compute could overlap them: not judged as exposed"


class TpAcrossNodesRule:
    """A tensor-parallel group spans hosts: its per-layer collectives cross the network."""

    name = "tensor parallelism across nodes"

    def not_judged(self, ctx: DiagnosisInput) -> tuple[str, ...]:
        return ()

    def evaluate(self, ctx: DiagnosisInput) -> Finding | None:
        host = {r.rank: r.hostname for r in ctx.analysis.ranks}
        groups = [g for g in ctx.analysis.groups if g.named and g.dim in TP_DIMS]
        spanning = [g for g in groups if len({host.get(r, "") for r in g.ranks}) > 1]
        if not spanning or any(not host.get(r) for g in spanning for r in g.ranks):
            return None
        tp = tp_comm(ctx)
        first = spanning[0]
        hosts = sorted({host[r] for r in first.ranks})
        evidence = [
            Evidence("tp groups across hosts", f"{len(spanning)} of {len(groups)}"),
            Evidence("e.g. ranks", ",".join(map(str, first.ranks))),
            Evidence("on hosts", ", ".join(hosts)),
        ]
        if tp is not None:
            evidence.append(Evidence("tp collectives", round(tp.share, 1), "% of step time"))
        return Finding(
            code="TP_ACROSS_NODES", bottleneck=bottleneck("TP_ACROSS_NODES"),
            summary=summary("TP_ACROSS_NODES", n=len(spanning), total=len(groups),
                            ranks=",".join(map(str, first.ranks)), hosts=", ".join(hosts)),
            share_pct=tp.share if tp is not None else None, saved_ms_per_step=None,
            evidence=tuple(evidence), remedies=(remedy("tp_in_node"),),
            basis="the saving depends on the links inside a node, which this run did not use",
        )  # fmt: skip


TP_RULES = (TpCommRule(), TpAcrossNodesRule())
