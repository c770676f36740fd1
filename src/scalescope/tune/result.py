"""The results of a study: every trial, its confirmation runs, the baseline, the best by
median, whether its gain is significant, and the knobs' importance."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from functools import cached_property

from scalescope.tune.space import GLOBAL_BATCH, Config, Knob, Space, Value, format_value


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
    samples_per_step: float | None = None
    """The global batch its run measured; None when samples were not counted."""


@dataclass(frozen=True)
class ConfirmRun:
    """One confirmation run of a measured trial's configuration, after the search."""

    trial: int
    """The number of the trial (the baseline's included) whose configuration ran again."""
    round: int
    """1 to --confirm-rounds."""
    status: str
    samples_per_s: float | None
    unit: str
    seconds: float
    run_dir: str
    error: str | None = None
    samples_per_step: float | None = None


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
    """The command line of the recommended configuration; empty when none is."""
    confirmations: tuple[ConfirmRun, ...] = ()
    required_runs: int = 1
    """Measurements a configuration needs to be named best: its trial and every
    confirmation round (1 + --confirm-rounds; 1 with --confirm 0)."""
    notes: tuple[str, ...] = ()
    """What the space left out and why (``space.left_out_note``)."""

    @cached_property
    def effects(self) -> tuple[KnobEffect, ...]:
        """What each knob alone does to speed (``knob_effects``), the largest spread first."""
        return tuple(knob_effects(self))

    @property
    def baseline(self) -> TrialRecord | None:
        baselines = [r for r in self.records if r.baseline]
        return next((r for r in baselines if r.status == "ok"), baselines[0] if baselines else None)

    @property
    def unit(self) -> str:
        """The unit of every speed of the study: the baseline's (all trials share it)."""
        base = self.baseline
        return base.unit if base is not None else next((r.unit for r in self.records), UNIT)

    def measurements(self, record: TrialRecord) -> list[float]:
        """Speeds of the trial (when measured, not pruned) and of its confirmation runs."""
        first = [record.samples_per_s] if record.status == "ok" and record.samples_per_s else []
        again = [
            c.samples_per_s
            for c in self.confirmations
            if c.trial == record.number and c.status == "ok" and c.samples_per_s
        ]
        return first + again

    def median(self, record: TrialRecord) -> float | None:
        values = self.measurements(record)
        return statistics.median(values) if values else None

    def confirmed(self, record: TrialRecord) -> bool:
        """Measured as often as the confirmation asks; the baseline needs no confirmation to
        lead: leading, it only keeps the configuration as given."""
        return record.baseline or len(self.measurements(record)) >= self.required_runs

    def by_median(self) -> list[TrialRecord]:
        """Measured trials, highest median first (the earlier trial first on a tie)."""
        measured = [r for r in self.records if self.median(r) is not None]
        return sorted(measured, key=lambda r: (-(self.median(r) or 0.0), r.number))

    @property
    def best(self) -> TrialRecord | None:
        """The highest median among the trials with every measurement (the baseline may be
        it): a configuration measured fewer times is never named best."""
        return next((r for r in self.by_median() if self.confirmed(r)), None)

    @property
    def unconfirmed_leader(self) -> TrialRecord | None:
        """A trial of a higher median than the best that lacks measurements (the budget or a
        failed run stopped its confirmation); None when the best leads."""
        leader = next(iter(self.by_median()), None)
        return leader if leader is not None and not self.confirmed(leader) else None

    def speedup(self, record: TrialRecord) -> float | None:
        """Median speed of the trial over the baseline's median."""
        base = self.baseline
        ours, theirs = self.median(record), self.median(base) if base else None
        return ours / theirs if ours and theirs else None

    def baseline_spread(self) -> float:
        """max - min speed of the baseline's measurements (0 with a single one)."""
        values = self.measurements(self.baseline) if self.baseline else []
        return max(values) - min(values) if values else 0.0

    def significant(self, record: TrialRecord) -> bool:
        """Faster than the baseline's median by more than the baseline's own spread (any
        gain counts when the baseline was not measured)."""
        ours = self.median(record)
        base = self.baseline
        theirs = self.median(base) if base else None
        if ours is None or (base is not None and record.number == base.number):
            return False
        return theirs is None or ours - theirs > self.baseline_spread()

    @property
    def recommended(self) -> TrialRecord | None:
        """The best configuration, when its gain is significant; else keep the one given."""
        best = self.best
        return best if best is not None and self.significant(best) else None

    def ranked(self) -> list[TrialRecord]:
        """Measured trials by median, fastest first, then pruned, then failed, in trial order."""
        order = {"ok": 0, "pruned": 1, "failed": 2, "interrupted": 3}
        return sorted(
            self.records,
            key=lambda r: (
                order.get(r.status, 4),
                -(self.median(r) or r.samples_per_s or 0.0),
                r.number,
            ),
        )

    def semantics(self, record: TrialRecord) -> list[str]:
        """What the trial changes besides speed, against the baseline, each once (the global
        batch with its measured sizes, e.g. ``the global batch: 16 → 8 samples per step``)."""
        base = self.baseline
        given = base.config if base else {}
        out: list[str] = []
        for knob in self.space:
            changed = (
                knob.name in record.config and given.get(knob.name) != record.config[knob.name]
            )
            if not (knob.semantics and changed and _active(record, knob)):
                continue
            text = knob.semantics
            if text == GLOBAL_BATCH:
                text = batch_change(base, record)
            if text and text not in out:
                out.append(text)
        return out


UNIT = "samples/s"


def batch_change(base: TrialRecord | None, record: TrialRecord) -> str:
    """The global batch's measured sizes; empty when they are equal (a knob the baseline
    did not state, at the value it had)."""
    before = base.samples_per_step if base is not None else None
    after = record.samples_per_step
    if before is None or after is None:
        return GLOBAL_BATCH
    if before == after:
        return ""
    return f"{GLOBAL_BATCH}: {before:g} → {after:g} samples per step"


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


def to_confirm(result: TuneResult, top: int) -> list[TrialRecord]:
    """The baseline (when measured) and the ``top`` fastest other measured trials by median,
    the configurations the confirmation phase runs again."""
    if top <= 0:
        return []
    base = result.baseline
    others = [r for r in result.ranked() if r.status == "ok" and not r.baseline]
    head = [base] if base is not None and base.status == "ok" else []
    return head + others[:top]


def confirm_plan(
    result: TuneResult, candidates: list[TrialRecord], rounds: int
) -> list[tuple[int, TrialRecord]]:
    """(round, trial) of the runs still to do, interleaved: each round runs every candidate
    once, in reverse order every other round (A B C, C B A) so no configuration always runs
    first; a round a candidate already has (a resumed study) is not run again."""
    done = {(c.trial, c.round) for c in result.confirmations}
    plan = []
    for round_ in range(1, rounds + 1):
        order = candidates if round_ % 2 else list(reversed(candidates))
        plan += [(round_, r) for r in order if (r.number, round_) not in done]
    return plan
