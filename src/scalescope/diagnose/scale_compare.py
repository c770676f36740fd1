"""Run B against run A when either is analysed from its node files (issue 50; ``scalescope
compare``): the step before and after and whether its change is beyond the steps' spread, the
percentiles over ranks and nodes, each verdict's causes (resolved, new, remaining), the late
nodes, ranks and links that went away or appeared, and the node what-if's gains. Nothing is
re-measured: every figure is one of the two runs' own analysis (scale_sides.py).

The step's change is beyond the spread when the two runs' mean steps (the job's step at each
sampled step, its mean over ranks) differ by more than ``SPREAD_SIGMAS`` standard errors of
their difference: the verdict's measure of noise (noise.py), over the two runs' steps.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from scalescope.analyze.scale.summary import ScaleAnalysis
from scalescope.analyze.verdict import Cause, Verdict
from scalescope.diagnose.noise import SPREAD_SIGMAS
from scalescope.diagnose.scale_sides import NODE_FILES, ReadRun, RunSide

RESOLVED, NEW, REMAINS = "resolved", "new", "remains"
WENT_AWAY, APPEARED, IN_BOTH = "went away", "appeared", "in both"


def change_pct(a: float | None, b: float | None) -> float | None:
    """100 x (b - a) / a; None where either is missing or a is 0."""
    if a is None or b is None or a == 0 or not (math.isfinite(a) and math.isfinite(b)):
        return None
    return 100.0 * (b - a) / a


@dataclass(frozen=True)
class Figure:
    """One figure before (A) and after (B), in the unit its name says."""

    a: float | None
    b: float | None
    change_pct: float | None


def figure(a: float | None, b: float | None) -> Figure:
    return Figure(a, b, change_pct(a, b))


@dataclass(frozen=True)
class StepChange:
    median_ms: Figure
    """The median over ranks of their mean step."""
    mean_ms: Figure
    """The mean over the (sampled) steps of the job's step."""
    noise_ms: float | None
    """``SPREAD_SIGMAS`` standard errors of the mean steps' difference (None: a run has fewer
    than 2 steps)."""
    beyond_spread: bool


@dataclass(frozen=True)
class CauseChange:
    status: str
    """``resolved`` (A's only), ``new`` (B's only) or ``remains`` (both)."""
    code: str
    bottleneck: str
    culprit: str | None
    """kind and name, "node node016"."""
    cost_ms: Figure
    """Its cost per step in each run (None where it is not a cause)."""
    summary: str
    """B's words where it is B's cause, else A's."""


@dataclass(frozen=True)
class LateChange:
    status: str
    """``went away`` (A's only), ``appeared`` (B's only) or ``in both``."""
    name: str
    figure: Figure
    """A late node or rank: busy above its median peer (ms/step); a slow link: its transfer
    (ms/call)."""


@dataclass(frozen=True)
class GainChange:
    host: str
    gain_ms: Figure
    """The node what-if's gain per step, where the node was late (else None)."""


@dataclass(frozen=True)
class ScaleComparison:
    """Run B against run A (JSON ``scale_compare/1``, docs/report-schema.md)."""

    a: RunSide
    b: RunSide
    step: StepChange
    rank_step_ms: dict[str, Figure] | None
    node_busy_ms: dict[str, Figure] | None
    causes: tuple[CauseChange, ...]
    late_nodes: tuple[LateChange, ...] | None
    """None: a run is analysed from its rank files (``left_out`` says so)."""
    late_ranks: tuple[LateChange, ...] | None
    slow_links: tuple[LateChange, ...] | None
    node_whatif: tuple[GainChange, ...] | None
    notes: tuple[str, ...] = ()
    """One line each: the world sizes differ; what is left out."""


def step_change(a: RunSide, b: RunSide) -> StepChange:
    x, y = a.steps, b.steps
    mean = figure(x.mean_ms, y.mean_ms)
    if min(x.steps, y.steps) < 2:
        return StepChange(figure(a.step_ms, b.step_ms), mean, None, False)
    noise = SPREAD_SIGMAS * math.sqrt(x.sd_ms**2 / x.steps + y.sd_ms**2 / y.steps)
    beyond = abs(y.mean_ms - x.mean_ms) > noise
    return StepChange(figure(a.step_ms, b.step_ms), mean, noise, beyond)


def _spreads(a: dict[str, float] | None, b: dict[str, float] | None) -> dict[str, Figure] | None:
    if a is None or b is None:
        return None
    return {k: figure(a[k], b[k]) for k in a}


def _culprit(c: Cause) -> str | None:
    return None if c.culprit is None else f"{c.culprit.kind} {c.culprit.name}"


def cause_changes(a: Verdict, b: Verdict) -> tuple[CauseChange, ...]:
    """Each verdict's causes matched by code and culprit: B's first, then A's resolved."""
    ka = {(c.code, _culprit(c)): c for c in a.causes}
    kb = {(c.code, _culprit(c)): c for c in b.causes}
    out = []
    for key, c in [*kb.items(), *((k, c) for k, c in ka.items() if k not in kb)]:
        before, after = ka.get(key), kb.get(key)
        status = REMAINS if before and after else NEW if after else RESOLVED
        cost = figure(_cost(before), _cost(after))
        out.append(CauseChange(status, c.code, c.bottleneck, key[1], cost, c.summary))
    return tuple(out)


def _cost(c: Cause | None) -> float | None:
    return None if c is None or c.cost is None else c.cost.ms_per_step


def late_changes(a: dict[str, float], b: dict[str, float]) -> tuple[LateChange, ...]:
    """By name: those in both and those that appeared (B's order), then those gone."""
    names = [*b, *(n for n in a if n not in b)]
    status = {n: IN_BOTH if n in a and n in b else APPEARED if n in b else WENT_AWAY
              for n in names}  # fmt: skip
    return tuple(LateChange(status[n], n, figure(a.get(n), b.get(n))) for n in names)


def _by(items: Iterable, name: Callable, value: Callable) -> dict[str, float]:
    """name -> value, the largest where two share a name (a link's groups)."""
    out: dict[str, float] = {}
    for x in items:
        out[name(x)] = max(out.get(name(x), -math.inf), value(x))
    return out


def _nodes(s: ScaleAnalysis) -> dict[str, float]:
    return _by(s.late_nodes, lambda n: n.host, lambda n: n.excess_ms)


def _ranks(s: ScaleAnalysis) -> dict[str, float]:
    return _by(s.late_ranks, lambda r: f"rank {r.ranks[0]} ({r.host})", lambda r: r.excess_ms)


def link_name(hosts: Iterable[str], op: str) -> str:
    return f"{' - '.join(sorted(hosts))} ({op})"


def _links(s: ScaleAnalysis) -> dict[str, float]:
    return _by(s.links, lambda x: link_name(x.hosts, x.op), lambda x: x.transfer_ms)


def gain_changes(a: ScaleAnalysis, b: ScaleAnalysis) -> tuple[GainChange, ...]:
    ga = {a.hosts[n]: g.gain_ms for n, g in a.gains.items()}
    gb = {b.hosts[n]: g.gain_ms for n, g in b.gains.items()}
    hosts = [*ga, *(h for h in gb if h not in ga)]
    return tuple(GainChange(h, figure(ga.get(h), gb.get(h))) for h in hosts)


def notes(a: RunSide, b: RunSide) -> tuple[str, ...]:
    out = []
    if a.world_size != b.world_size:
        out.append(f"the runs differ in size (A {a.world_size:,} ranks on {a.nodes:,} nodes, "
                   f"B {b.world_size:,} on {b.nodes:,}): compared as they are, the job's "
                   "step against the job's; nodes, ranks and links matched by name")  # fmt: skip
    ranked = [s for s, side in (("A", a), ("B", b)) if side.analysed_from != NODE_FILES]
    if ranked:
        out.append(f"{' and '.join(ranked)} analysed from rank files: compared on the step "
                   "times and the verdict; the nodes' busy time, the late nodes, ranks and "
                   "links and the node what-if are the node files' and left out")  # fmt: skip
    return tuple(out)


def compare_scale(a: ReadRun, b: ReadRun) -> ScaleComparison:
    """Run ``b`` against run ``a``; every change is B's against A's."""
    x, y = a.scale, b.scale

    def late(of: Callable[[ScaleAnalysis], dict[str, float]]) -> tuple[LateChange, ...] | None:
        return late_changes(of(x), of(y)) if x is not None and y is not None else None

    return ScaleComparison(
        a.side, b.side, step_change(a.side, b.side),
        _spreads(a.side.rank_step_ms, b.side.rank_step_ms),
        _spreads(a.side.node_busy_ms, b.side.node_busy_ms),
        cause_changes(a.verdict, b.verdict), late(_nodes), late(_ranks), late(_links),
        gain_changes(x, y) if x is not None and y is not None else None, notes(a.side, b.side),
    )  # fmt: skip
