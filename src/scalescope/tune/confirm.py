"""The confirmation phase: after the search, the baseline and the top configurations run
again, interleaved, through the same trial runner, so the best is named by the median of
several measurements rather than by one short trial on a noisy machine. When the highest
median then belongs to a configuration with fewer measurements (one that was not among the
top, or whose lucky first run made it so), it runs its missing rounds next, within
``--budget``, until the highest median has them all.

The runs are kept in the study's user attributes, so ``--resume`` does not repeat them.
"""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path
from typing import Protocol

import optuna
from torch.distributed.elastic.multiprocessing.api import SignalException

from scalescope.tune.apply import TuneTarget, trial_setup
from scalescope.tune.result import ConfirmRun, TrialRecord, TuneResult, confirm_plan, to_confirm
from scalescope.tune.space import Space
from scalescope.tune.study import Listener, TuneOptions
from scalescope.tune.trial import run_trial


class Search(Protocol):
    """What the confirmation needs of the search that runs it (tune.search.Search), so the
    two modules do not import each other."""

    target: TuneTarget
    space: Space
    options: TuneOptions
    study: optuna.Study
    study_dir: Path
    listener: Listener

    def over_budget(self) -> bool: ...


CONFIRM_ATTR = "confirmations"


def stored(study: optuna.Study) -> tuple[ConfirmRun, ...]:
    return tuple(ConfirmRun(**d) for d in study.user_attrs.get(CONFIRM_ATTR, []))


def store(study: optuna.Study, run: ConfirmRun) -> None:
    runs = [*study.user_attrs.get(CONFIRM_ATTR, []), asdict(run)]
    study.set_user_attr(CONFIRM_ATTR, runs)


def confirm(search: Search, result: TuneResult) -> TuneResult:
    """``result`` with the confirmation runs still to do done (stopped: interrupted when the
    user stopped one; that run is not kept), then the leader by median confirmed."""
    options = search.options
    if options.confirm <= 0:
        return result
    result = replace(result, required_runs=1 + options.confirm_rounds)
    plan = confirm_plan(result, to_confirm(result, options.confirm), options.confirm_rounds)
    result = run_plan(search, result, plan)
    skipped: set[int] = set()
    while result.stopped != "interrupted":
        leader = next((r for r in result.by_median() if r.number not in skipped), None)
        if leader is None or result.confirmed(leader):
            break
        missing = confirm_plan(result, [leader], options.confirm_rounds)
        if not missing or search.over_budget():
            skipped.add(leader.number)
            continue
        result = run_plan(search, result, missing)
    return result


def run_plan(search: Search, result: TuneResult, plan: list) -> TuneResult:
    """``result`` with the runs of ``plan`` done and kept."""
    for done, (round_, record) in enumerate(plan):
        search.listener.confirm_starts(done, len(plan), round_, record)
        try:
            run = confirm_run(search, record, round_)
        except (KeyboardInterrupt, SignalException):
            run = None
        if run is None:
            return replace(result, stopped="interrupted", confirmations=stored(search.study))
        store(search.study, run)
        search.listener.confirm_ends(run)
    return replace(result, confirmations=stored(search.study))


def confirm_run(search: Search, record: TrialRecord, round_: int) -> ConfirmRun | None:
    """One more run of the trial's configuration; None when the user interrupted it."""
    run_dir = fresh_dir(search.study_dir / "trials" / f"trial-{record.number:04d}-confirm-{round_}")
    config = {} if record.baseline else record.config
    setup = trial_setup(search.target, search.space, config, run_dir)

    def progress(elapsed: float, rate: float | None) -> bool:
        search.listener.progress(elapsed, rate)
        return False

    ran = run_trial(setup.spec, setup.env, search.options.trial_seconds, progress)
    if ran.status == "interrupted":
        return None
    return ConfirmRun(trial=record.number, round=round_, **ran.outcome())


def fresh_dir(path: Path) -> Path:
    """``path``, or ``path-2``, ``path-3``... when a run interrupted before (not kept) left it."""
    found, n = path, 1
    while found.exists():
        n += 1
        found = path.with_name(f"{path.name}-{n}")
    return found
