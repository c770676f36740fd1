"""The results of a study: every trial, the baseline, the best, the knobs' importance."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from scalescope.tune.space import Config, Knob, Space, Value, format_value


@dataclass(frozen=True)
class TrialRecord:
    number: int
    config: Config
    """The knob values of the trial; empty for a baseline outside the space."""
    status: str
    """ok, failed, pruned or interrupted."""
    samples_per_s: float | None
    unit: str
    seconds: float
    run_dir: str
    error: str | None = None
    baseline: bool = False
    seeded_by: str = ""
    """The finding code whose remedies proposed it."""
    stopped_at_budget: bool = False


@dataclass(frozen=True)
class KnobEffect:
    """Mean samples/s of the measured trials at each value of one knob."""

    name: str
    means: tuple[tuple[str, float, int], ...]
    """(value, mean samples/s, trials) per value tried."""
    spread_pct: float
    """(best mean - worst mean) / best mean x 100: how much this knob alone moves speed."""


@dataclass(frozen=True)
class TuneResult:
    target: str
    space: Space
    records: tuple[TrialRecord, ...]
    stopped: str
    """finished, budget, exhausted (every point measured) or interrupted."""
    reuse: str = ""
    """The command line of the best configuration."""

    @property
    def baseline(self) -> TrialRecord | None:
        baselines = [r for r in self.records if r.baseline]
        return next((r for r in baselines if r.status == "ok"), baselines[0] if baselines else None)

    @property
    def best(self) -> TrialRecord | None:
        measured = [r for r in self.records if r.status == "ok" and r.samples_per_s]
        return max(measured, key=lambda r: r.samples_per_s or 0.0) if measured else None

    def speedup(self, record: TrialRecord) -> float | None:
        base = self.baseline
        if base is None or not base.samples_per_s or not record.samples_per_s:
            return None
        return record.samples_per_s / base.samples_per_s

    def ranked(self) -> list[TrialRecord]:
        """Measured trials fastest first, then pruned, then failed, each in trial order."""
        order = {"ok": 0, "pruned": 1, "failed": 2, "interrupted": 3}
        return sorted(
            self.records,
            key=lambda r: (order.get(r.status, 4), -(r.samples_per_s or 0.0), r.number),
        )

    def semantics(self, record: TrialRecord) -> list[str]:
        """What the trial changes besides speed, against the baseline."""
        base = self.baseline.config if self.baseline else {}
        out = []
        for knob in self.space:
            changed = knob.name in record.config and base.get(knob.name) != record.config[knob.name]
            if knob.semantics and changed and _active(record, knob):
                out.append(knob.semantics)
        return out


def _active(record: TrialRecord, knob: Knob) -> bool:
    """A knob at its off value (bf16 false, hook none) changes nothing."""
    return record.config[knob.name] not in (False, "none")


def knob_effects(result: TuneResult) -> list[KnobEffect]:
    """Per knob, mean samples/s at each value (measured trials only), largest spread first."""
    measured = [r for r in result.records if r.status == "ok" and r.samples_per_s and r.config]
    effects = []
    for knob in result.space:
        groups: dict[Value, list[float]] = {}
        for r in measured:
            if knob.name in r.config:
                groups.setdefault(r.config[knob.name], []).append(r.samples_per_s or 0.0)
        means = [
            (format_value(v), statistics.fmean(groups[v]), len(groups[v]))
            for v in knob.values
            if v in groups
        ]
        if not means:
            continue
        top = max(m for _, m, _ in means)
        spread = 100.0 * (top - min(m for _, m, _ in means)) / top if top > 0 else 0.0
        effects.append(KnobEffect(knob.name, tuple(means), spread))
    return sorted(effects, key=lambda e: -e.spread_pct)
