"""The optuna study: parameters of a configuration, the grid, options and resume checks."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from scalescope.launch.run.runner import RunSpec
from scalescope.tune.apply import TuneTarget
from scalescope.tune.space import SpaceContext, parse_space, space_size
from scalescope.tune.study import TuneOptions, make_sampler, open_study, suggest, to_params

SPACE = parse_space(["bucket_cap_mb=5,25,100", "bind_to=domain,core"], SpaceContext(2, 8))
TARGET = TuneTarget(RunSpec(target=__file__))


def test_ordered_knobs_by_index_others_by_value() -> None:
    config = {"bucket_cap_mb": 100.0, "bind_to": "core"}
    assert to_params(SPACE, config) == {"bucket_cap_mb": 2, "bind_to": "core"}
    study = optuna.create_study(direction="maximize")
    study.enqueue_trial(to_params(SPACE, config))
    assert suggest(study.ask(), SPACE) == config


def test_grid_covers_the_space_without_stopping_the_study() -> None:
    options = TuneOptions(sampler="grid", seed=1)
    study = optuna.create_study(direction="maximize", sampler=make_sampler(options, SPACE))
    seen = set()
    for _ in range(space_size(SPACE)):
        trial = study.ask()
        seen.add(tuple(suggest(trial, SPACE).values()))
        study.tell(trial, 1.0)  # optuna's own GridSampler would raise here at the end
    assert len(seen) == space_size(SPACE)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"trials": 0}, "--trials"),
        ({"trial_seconds": 0}, "--trial-seconds"),
        ({"budget_min": -1}, "--budget"),
        ({"sampler": "cma"}, "--sampler"),
    ],
)
def test_bad_options(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TuneOptions(**kwargs)


def test_resume_needs_the_same_study(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="holds no study"):
        open_study(tmp_path, TARGET, SPACE, TuneOptions(resume=True))
    open_study(tmp_path, TARGET, SPACE, TuneOptions())
    with pytest.raises(ValueError, match="already holds a study"):
        open_study(tmp_path, TARGET, SPACE, TuneOptions())
    other = parse_space(["bucket_cap_mb=5,25"], SpaceContext(2, 8))
    with pytest.raises(ValueError, match="another workload or space"):
        open_study(tmp_path, TARGET, other, TuneOptions(resume=True))
    assert open_study(tmp_path, TARGET, SPACE, TuneOptions(resume=True)) is not None


class _Quiet:
    def trial_starts(self, done, total, config, baseline) -> None: ...
    def progress(self, elapsed_s, samples_per_s) -> None: ...
    def trial_ends(self, record) -> None: ...
    def confirm_starts(self, done, total, round_, record) -> None: ...
    def confirm_ends(self, run) -> None: ...


def test_ctrl_c_before_the_launcher_takes_it_keeps_the_trial_as_interrupted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C as a trial starts, before its launcher handles the signal, is a
    KeyboardInterrupt out of the launch: the trial is kept, interrupted, not dropped from
    the study."""
    from scalescope.tune import search, trial

    def stopped(spec, quiet):  # Ctrl-C before the launcher installed its handler
        raise KeyboardInterrupt

    monkeypatch.setattr(trial, "start", stopped)
    result = search.tune(TARGET, SPACE, TuneOptions(trials=3), tmp_path, _Quiet())
    assert result.stopped == "interrupted"
    assert [(t.number, t.status, t.error) for t in result.records] == [
        (0, "interrupted", "interrupted")
    ]
    assert result.records[0].run_dir.endswith("trial-0000")
