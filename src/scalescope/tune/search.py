"""The trial loop: ask the study for a configuration, run it, tell the study how it went."""

from __future__ import annotations

import time
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import optuna
from torch.distributed.elastic.multiprocessing.api import SignalException

from scalescope.tune.apply import TuneTarget, baseline_config, reuse_command, trial_setup
from scalescope.tune.confirm import confirm, stored
from scalescope.tune.result import TrialRecord, TuneResult
from scalescope.tune.seeds import recorded_layout, seeds, skipped_knobs
from scalescope.tune.space import (
    GLOBAL_BATCH,
    Config,
    Space,
    config_key,
    misfits,
    space_size,
)
from scalescope.tune.study import (
    MAX_REPEATS,
    Listener,
    TuneOptions,
    open_study,
    suggest,
    to_params,
)
from scalescope.tune.trial import PROGRESS_EVERY_S, STEPS_UNIT, TrialResult, run_trial

TrialState = optuna.trial.TrialState
RECORD_ATTRS = tuple(f.name for f in fields(TrialRecord) if f.name != "number")
"""A record's fields kept in its trial's user attributes (the number is the trial's own)."""
RECORD_FALLBACKS: dict[str, Any] = {
    "samples_per_s": None,
    "unit": "samples/s",
    "seconds": 0.0,
    "run_dir": "",
}
"""For attributes not kept: None values, and those an older study did not keep."""


def record_of(trial: optuna.trial.FrozenTrial) -> TrialRecord | None:
    """The record kept in a finished trial's attributes; None for repeats and unfinished."""
    attrs = trial.user_attrs
    if "status" not in attrs or "repeat_of" in attrs:
        return None
    kept = {name: attrs[name] for name in RECORD_ATTRS if name in attrs}
    kept["config"] = dict(kept.get("config", {}))
    return TrialRecord(**(RECORD_FALLBACKS | kept), number=trial.number)


def records(study: optuna.Study) -> list[TrialRecord]:
    found = (record_of(t) for t in study.get_trials(deepcopy=False))
    return [r for r in found if r is not None]


class Search:
    def __init__(
        self,
        target: TuneTarget,
        space: Space,
        options: TuneOptions,
        study_dir: Path,
        listener: Listener,
        notes: tuple[str, ...] = (),
    ) -> None:
        self.target, self.space, self.options, self.notes = target, space, options, notes
        self.study_dir, self.listener = Path(study_dir), listener
        self.study = open_study(self.study_dir, target, space, options)
        self.done = records(self.study)
        self.started = time.monotonic()
        self.measured = {
            config_key(space, r.config): r
            for r in self.done
            if r.config and r.status != "interrupted"
        }

    def over_budget(self) -> bool:
        budget = self.options.budget_min
        return budget is not None and time.monotonic() - self.started >= 60 * budget

    def run(self) -> TuneResult:
        stopped = "finished"
        self.started = time.monotonic()
        for given in (r for r in self.done if r.baseline):
            refuse_uncounted(given, self.space)
        if not any(r.baseline and r.status != "interrupted" for r in self.done):
            self._enqueue_baseline()
        try:
            stopped = self._loop()
        except (KeyboardInterrupt, SignalException):
            stopped = "interrupted"
            self._fail_running()
        result = TuneResult(
            self.target.name,
            self.space,
            tuple(records(self.study)),
            stopped,
            confirmations=stored(self.study),
            notes=self.notes,
        )
        if stopped != "interrupted":
            result = confirm(self, result)
        chosen = result.recommended
        if chosen is not None:
            result = replace(result, reuse=reuse_command(self.target, self.space, chosen.config))
        return result

    def _loop(self) -> str:
        repeats = 0
        while len(self.done) < self.options.trials:
            if self.over_budget():
                return "budget"
            if len(self.measured) >= space_size(self.space) or repeats > MAX_REPEATS:
                return "exhausted"
            trial = self.study.ask()
            baseline = bool(trial.user_attrs.get("baseline"))
            given = baseline_config(self.target, self.space) if baseline else None
            config = suggest(trial, self.space) if given or not baseline else {}
            key = config_key(self.space, config)
            if not baseline and key in self.measured:
                repeats += 1
                self._repeat(trial, self.measured[key])
                continue
            repeats = 0
            record = self._run(trial, config, baseline)
            if record.status == "interrupted":
                return "interrupted"
            if baseline:
                refuse_uncounted(record, self.space)
            if baseline and record.status == "ok":
                self._after_baseline(record)
        return "finished"

    def _run(self, trial: optuna.Trial, config: Config, baseline: bool) -> TrialRecord:
        run_dir = self.study_dir / "trials" / f"trial-{trial.number:04d}"
        setup = trial_setup(self.target, self.space, {} if baseline else config, run_dir)
        self.listener.trial_starts(len(self.done), self.options.trials, config, baseline)

        def progress(elapsed: float, rate: float | None) -> bool:
            self.listener.progress(elapsed, rate)
            if baseline or rate is None:
                return False
            trial.report(rate, round(elapsed / PROGRESS_EVERY_S))
            return trial.should_prune()

        result = run_trial(setup.spec, setup.env, self.options.trial_seconds, progress)
        record = self._tell(trial, config, baseline, result)
        self.listener.trial_ends(record)
        return record

    def _tell(
        self, trial: optuna.Trial, config: Config, baseline: bool, result: TrialResult
    ) -> TrialRecord:
        record = TrialRecord(
            number=trial.number,
            config=config,
            baseline=baseline,
            seeded_by=str(trial.user_attrs.get("seeded_by", "")),
            stopped_at_budget=result.stopped_at_budget,
            **result.outcome(),
        )
        for name, value in _attrs(record).items():
            trial.set_user_attr(name, value)
        if record.status == "ok":
            self.study.tell(trial, record.samples_per_s)
        else:
            state = TrialState.PRUNED if record.status == "pruned" else TrialState.FAIL
            self.study.tell(trial, state=state)
        self.done.append(record)
        if config and record.status != "interrupted":
            self.measured[config_key(self.space, config)] = record
        return record

    def _repeat(self, trial: optuna.Trial, earlier: TrialRecord) -> None:
        trial.set_user_attr("repeat_of", earlier.number)
        if earlier.status == "ok":
            self.study.tell(trial, earlier.samples_per_s)
        else:
            self.study.tell(trial, state=TrialState.FAIL)

    def _enqueue_baseline(self) -> None:
        given = baseline_config(self.target, self.space)
        params = to_params(self.space, given) if given else {}
        self.study.enqueue_trial(params, user_attrs={"baseline": True}, skip_if_exists=False)

    def _after_baseline(self, baseline: TrialRecord) -> None:
        """The baseline's recorded layout refuses a knob every trial would fail with; the
        diagnosis' proposals, within what the layout takes, are queued next."""
        from scalescope.diagnose.recording import Recording

        rec = Recording.load(Path(baseline.run_dir))
        coll = rec.analysis.collectives
        layout = recorded_layout(t.tag for t in coll.per_step) if coll is not None else None
        refuse_failing(layout, self.space)
        if self.options.sampler == "grid":
            return
        skip = skipped_knobs(rec.run.ranks, layout)
        for seed in seeds(rec.diagnosis, self.space, baseline.config or None, skip):
            if config_key(self.space, seed.config) in self.measured:
                continue
            params = to_params(self.space, seed.config)
            self.study.enqueue_trial(params, user_attrs={"seeded_by": seed.code})

    def _fail_running(self) -> None:
        for t in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            self.study.tell(t.number, state=TrialState.FAIL)


def refuse_uncounted(baseline: TrialRecord, space: Space) -> None:
    """Global steps/s cannot rank configurations whose steps hold other numbers of samples
    (other ranks, another batch size): a ValueError naming the knobs, before any is run."""
    if baseline.status != "ok" or baseline.unit != STEPS_UNIT:
        return
    knobs = [k.name for k in space if k.semantics == GLOBAL_BATCH]
    if knobs:
        raise ValueError(
            f"the script's samples are not counted (no DataLoader batch, no DDP forward), so "
            f"speed is in {STEPS_UNIT}, which cannot compare {', '.join(knobs)} (they change "
            f"the samples of a step): remove {', '.join(knobs)} from --space"
        )


FAILING = ("channels_last",)
"""Misfits of a layout that fail the run (FSDP2 and non-contiguous parameters), not only
change nothing."""


def refuse_failing(layout: str | None, space: Space) -> None:
    """A knob the recorded layout fails with (channels_last under FSDP2): a ValueError naming
    it, before the sampler spends trials on it."""
    why = misfits(layout)
    failing = [k.name for k in space if k.name in why and k.name in FAILING]
    if failing:
        name = failing[0]
        raise ValueError(
            f"the baseline runs {layout}, which cannot take {name} ({why[name]}): "
            f"remove {name} from --space"
        )


def _attrs(record: TrialRecord) -> dict[str, Any]:
    values = {name: getattr(record, name) for name in RECORD_ATTRS}
    return {k: v for k, v in values.items() if v is not None}


def tune(
    target: TuneTarget,
    space: Space,
    options: TuneOptions,
    study_dir: Path,
    listener: Listener,
    notes: tuple[str, ...] = (),
) -> TuneResult:
    """Run (or --resume) the study of ``target`` over ``space``; every trial's outcome, with
    ``notes`` on the space (what it left out)."""
    return Search(target, space, options, study_dir, listener, notes).run()
