"""What the rules read: the analysis, the run's facts, and measures derived from them.

``DiagnosisInput`` is built by ``engine.diagnose_run`` (or by hand in tests). The helpers
here turn it into the per-rank times and per-host placements every rule needs; they never
invent a value: what was not recorded is None or left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from scalescope.analyze.steps.steps import RankSteps
from scalescope.analyze.summary import RunAnalysis
from scalescope.bench.flops import ModelFlops
from scalescope.diagnose.thresholds import DEFAULT_THRESHOLDS, Thresholds
from scalescope.events.run import RankMeta, RunMeta
from scalescope.events.schema import PHASES

COMPUTE_PHASES = ("forward", "backward", "optimizer")
"""The phases that are the model's own work."""
RECORDED_PHASES = PHASES
LOCAL_HOST = "this host"


@dataclass(frozen=True)
class DataFiles:
    """The image folder a bench run read, as found on disk when diagnosing."""

    path: str
    files: int
    mean_bytes: float
    complete: bool = True
    """False when counting stopped early: the folder holds at least ``files`` files."""


@dataclass(frozen=True)
class DiagnosisInput:
    analysis: RunAnalysis
    meta: RunMeta
    ranks: dict[int, RankMeta]
    bench: dict[str, Any] | None
    """bench.json of a ``scalescope bench`` run, None otherwise."""
    model_flops: ModelFlops | None = None
    data_files: DataFiles | None = None
    thresholds: Thresholds = field(default=DEFAULT_THRESHOLDS)


@dataclass(frozen=True)
class RankTimes:
    """One rank's mean times per measured step (ms); phases that were never recorded are
    absent from ``phases``."""

    rank: int
    step_ms: float
    phases: dict[str, float]
    samples_per_step: float | None

    def phase(self, name: str) -> float | None:
        return self.phases.get(name)

    @property
    def compute_ms(self) -> float | None:
        """forward + backward + optimizer; None unless forward or backward was recorded."""
        if "forward" not in self.phases and "backward" not in self.phases:
            return None
        return sum(self.phases.get(p, 0.0) for p in COMPUTE_PHASES)


def _rank_times(rs: RankSteps) -> RankTimes | None:
    if not rs.num_steps or not rs.mean_step_ms:
        return None
    phases = {p.phase: p.mean_ms for p in rs.phases if p.phase in RECORDED_PHASES}
    samples = rs.samples / rs.num_steps if rs.samples else None
    return RankTimes(rs.rank, rs.mean_step_ms, phases, samples)


def rank_times(analysis: RunAnalysis) -> tuple[RankTimes, ...]:
    """Times of every rank with measured steps (empty when no step was recorded)."""
    if analysis.steps is None:
        return ()
    found = (_rank_times(rs) for rs in analysis.steps.ranks)
    return tuple(t for t in found if t is not None)


def mean_phase(times: tuple[RankTimes, ...], phase: str) -> float | None:
    """Mean over the ranks that recorded ``phase`` of its ms per step."""
    values = [t.phases[phase] for t in times if phase in t.phases]
    return sum(values) / len(values) if values else None


def mean_step(times: tuple[RankTimes, ...]) -> float | None:
    return sum(t.step_ms for t in times) / len(times) if times else None


def mean_compute(times: tuple[RankTimes, ...]) -> float | None:
    values = [t.compute_ms for t in times if t.compute_ms is not None]
    return sum(values) / len(values) if values else None


def share_pct(ms: float, step_ms: float) -> float:
    """``ms`` as a share of the step, at most 100 % (a wait beyond the step is an
    inconsistent timeline: ``TimelineRule`` says so)."""
    return min(100.0 * ms / step_ms, 100.0) if step_ms > 0 else 0.0


def rank_threads(meta: RankMeta) -> int | None:
    """Compute threads of a rank: what torch reported, else its OMP_NUM_THREADS."""
    if meta.num_threads > 0:
        return meta.num_threads
    raw = meta.thread_env.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else None


def hosts(ctx: DiagnosisInput) -> dict[str, list[RankMeta]]:
    """Rank files grouped by host name, in rank order."""
    grouped: dict[str, list[RankMeta]] = {}
    for rank in sorted(ctx.ranks):
        meta = ctx.ranks[rank]
        grouped.setdefault(meta.hostname or LOCAL_HOST, []).append(meta)
    return grouped


def threads_per_core(hardware: dict[str, Any]) -> int:
    value = hardware.get("threads_per_core")
    return value if isinstance(value, int) and value > 0 else 1


def machine_cores(hardware: dict[str, Any]) -> int | None:
    """Physical cores the launcher could use: min(physical cores, cpus in its affinity)."""
    counts = (hardware.get("physical_cores"), hardware.get("usable_cores"))
    known = [n for n in counts if isinstance(n, int) and n > 0]
    return min(known) if known else None


def host_cores(ranks: list[RankMeta], hardware: dict[str, Any]) -> int | None:
    """Physical cores the ranks of one host may run on: the union of their cpus (hardware
    threads of a core count once), else the machine's cores from the facts."""
    cpus = {c for r in ranks for c in r.cpus}
    if cpus:
        return max(1, len(cpus) // threads_per_core(hardware))
    return machine_cores(hardware)


def bench_option(ctx: DiagnosisInput, name: str) -> Any:
    """A bench option as the run recorded it (run.json options), else None."""
    if ctx.meta.workload == "script":
        return None
    return ctx.meta.options.get(name)
