"""tune's pruner on a real optuna study: a trial slower than the finished ones at the same
report is pruned once a third of its budget has run, not before, and never with ``--no-prune``.
The live study of tests/e2e/test_tune_defaults.py (a slow trial pruned by default) runs in
``make bench``; this is CI's check of the same decision."""

from __future__ import annotations

import optuna
import pytest

from scalescope.tune.study import TuneOptions, make_pruner
from scalescope.tune.trial import PROGRESS_EVERY_S

TRIAL_S = 30.0
WARMUP = int(TRIAL_S / 3 / PROGRESS_EVERY_S)
"""The first report that may prune: the one at a third of the budget (the 5th of a 30-s trial)."""


def study_after(options: TuneOptions, finished: list[float]) -> optuna.Study:
    """A study whose finished trials reported ``rate`` at every progress report."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", pruner=make_pruner(options))
    for rate in finished:
        trial = study.ask()
        for step in range(1, int(TRIAL_S / PROGRESS_EVERY_S) + 1):
            trial.report(rate, step)
        study.tell(trial, rate)
    return study


def prunes_at(study: optuna.Study, rate: float) -> int | None:
    """The first report at which a trial running at ``rate`` is pruned; None if never."""
    trial = study.ask()
    for step in range(1, int(TRIAL_S / PROGRESS_EVERY_S) + 1):
        trial.report(rate, step)
        if trial.should_prune():
            return step
    return None


def test_a_slow_trial_is_pruned_once_a_third_of_its_budget_has_run() -> None:
    study = study_after(TuneOptions(trial_seconds=TRIAL_S), [100.0, 110.0, 120.0])
    assert prunes_at(study, 10.0) == WARMUP


def test_a_trial_as_fast_as_the_others_runs_to_its_end() -> None:
    study = study_after(TuneOptions(trial_seconds=TRIAL_S), [100.0, 110.0, 120.0])
    assert prunes_at(study, 115.0) is None


def test_nothing_is_pruned_before_three_trials_have_finished() -> None:
    study = study_after(TuneOptions(trial_seconds=TRIAL_S), [100.0, 110.0])
    assert prunes_at(study, 10.0) is None


@pytest.mark.parametrize("finished", [[100.0, 110.0, 120.0], [100.0] * 6])
def test_no_prune_runs_every_trial_to_its_end(finished: list[float]) -> None:
    study = study_after(TuneOptions(trial_seconds=TRIAL_S, prune=False), finished)
    assert prunes_at(study, 1.0) is None
