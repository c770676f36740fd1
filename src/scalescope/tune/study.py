"""The search: an optuna study over the space, stored in the tune directory (SQLite), with
the baseline first, then the diagnosis' proposals, then the sampler's choices.

A configuration the sampler proposes again is not run again: the study is told the value
already measured, and only new configurations count as trials.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import optuna

from scalescope.events.files import TUNE_STUDY_FILE
from scalescope.tune.apply import TuneTarget
from scalescope.tune.result import ConfirmRun, TrialRecord
from scalescope.tune.space import Config, Space
from scalescope.tune.trial import PROGRESS_EVERY_S

STUDY_NAME = "scalescope-tune"
MAX_REPEATS = 200
"""Proposals of already measured configurations in a row before the space counts as done."""
SAMPLERS = ("tpe", "gp", "random", "grid")


@dataclass(frozen=True, kw_only=True)
class TuneOptions:
    trials: int = 20
    """Trials of the study in total (the baseline included); --resume continues up to it."""
    budget_min: float | None = None
    """No trial starts after this many minutes of this invocation."""
    trial_seconds: float = 60.0
    sampler: str = "tpe"
    prune: bool = True
    seed: int | None = 0
    resume: bool = False
    confirm: int = 3
    """Top configurations run again with the baseline after the search; 0: none."""
    confirm_rounds: int = 2

    def __post_init__(self) -> None:
        if self.trials < 1:
            raise ValueError(f"--trials must be at least 1, got {self.trials}")
        if self.trial_seconds <= 0:
            raise ValueError(f"--trial-seconds must be positive, got {self.trial_seconds:g}")
        if self.budget_min is not None and self.budget_min <= 0:
            raise ValueError(f"--budget must be positive minutes, got {self.budget_min:g}")
        if self.confirm < 0:
            raise ValueError(f"--confirm must be 0 (off) or more, got {self.confirm}")
        if self.confirm_rounds < 1:
            raise ValueError(f"--confirm-rounds must be at least 1, got {self.confirm_rounds}")
        if self.sampler not in SAMPLERS:
            raise ValueError(f"--sampler must be one of {', '.join(SAMPLERS)}")


class Listener(Protocol):
    def trial_starts(self, done: int, total: int, config: Config, baseline: bool) -> None: ...
    def progress(self, elapsed_s: float, samples_per_s: float | None) -> None: ...
    def trial_ends(self, record: TrialRecord) -> None: ...
    def confirm_starts(self, done: int, total: int, round_: int, record: TrialRecord) -> None: ...
    def confirm_ends(self, run: ConfirmRun) -> None: ...


def _distribution(knob: Any) -> optuna.distributions.BaseDistribution:
    if knob.ordered:
        return optuna.distributions.IntDistribution(0, len(knob.values) - 1)
    return optuna.distributions.CategoricalDistribution(knob.values)


def to_params(space: Space, config: Config) -> dict[str, Any]:
    """optuna parameters of a configuration: ordered knobs by index, others by value."""
    return {k.name: k.values.index(config[k.name]) if k.ordered else config[k.name] for k in space}


def suggest(trial: optuna.Trial, space: Space) -> Config:
    config: Config = {}
    for knob in space:
        if knob.ordered:
            config[knob.name] = knob.values[trial.suggest_int(knob.name, 0, len(knob.values) - 1)]
        else:
            config[knob.name] = trial.suggest_categorical(knob.name, knob.values)
    return config


class GridSearch(optuna.samplers.GridSampler):
    """optuna's grid, without its ``study.stop()`` once the grid is covered (allowed only
    inside ``study.optimize``): the search loop ends when every point was measured."""

    def after_trial(self, study: Any, trial: Any, state: Any, values: Any) -> None:
        return None


def make_sampler(options: TuneOptions, space: Space) -> optuna.samplers.BaseSampler:
    if options.sampler == "grid":
        grid = {k.name: list(range(len(k.values))) if k.ordered else list(k.values) for k in space}
        return GridSearch(grid, seed=options.seed)
    if options.sampler == "random":
        return optuna.samplers.RandomSampler(seed=options.seed)
    if options.sampler == "gp":
        try:
            return optuna.samplers.GPSampler(seed=options.seed)
        except ImportError as exc:
            raise ValueError(f"--sampler gp needs scipy ({exc}); use tpe") from exc
    startup = max(2, min(10, options.trials // 5))
    return optuna.samplers.TPESampler(seed=options.seed, n_startup_trials=startup)


def make_pruner(options: TuneOptions) -> optuna.pruners.BasePruner:
    """Stop a trial in the slowest quarter at the same point (progress reports come every
    PROGRESS_EVERY_S seconds; report k is at k x PROGRESS_EVERY_S) after a third of its
    budget, once 3 trials have finished."""
    if not options.prune:
        return optuna.pruners.NopPruner()
    warmup = max(1, int(options.trial_seconds / 3 / PROGRESS_EVERY_S))
    return optuna.pruners.PercentilePruner(25.0, n_startup_trials=3, n_warmup_steps=warmup)


def describe(target: TuneTarget, space: Space) -> dict[str, Any]:
    """What a study searches; --resume must search the same."""
    return {
        "target": target.spec.target,
        "args": list(target.spec.args),
        "bench": target.bench.model if target.bench else None,
        "space": {k.name: [str(v) for v in k.values] for k in space},
    }


def open_study(study_dir: Path, target: TuneTarget, space: Space, options: TuneOptions):
    path = study_dir / TUNE_STUDY_FILE
    if options.resume and not path.is_file():
        raise ValueError(f"--resume: {study_dir} holds no study ({TUNE_STUDY_FILE})")
    if not options.resume and path.exists():
        raise ValueError(f"{study_dir} already holds a study: add --resume, or another --run-dir")
    study_dir.mkdir(parents=True, exist_ok=True)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        study_name=STUDY_NAME,
        storage=f"sqlite:///{path.resolve()}",
        direction="maximize",
        sampler=make_sampler(options, space),
        pruner=make_pruner(options),
        load_if_exists=options.resume,
    )
    wanted = describe(target, space)
    if options.resume and study.user_attrs.get("workload") != wanted:
        raise ValueError(
            f"--resume: the study in {study_dir} searched another workload or space "
            f"({study.user_attrs.get('workload')})"
        )
    study.set_user_attr("workload", wanted)
    return study
