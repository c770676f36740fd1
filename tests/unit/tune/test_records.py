"""A run's outcome becomes a search trial's record or a confirmation run through one helper, and
a record survives the study's storage (a resumed study reads back what the search wrote)."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from scalescope.launch.run.runner import RunSpec
from scalescope.tune.apply import TuneTarget
from scalescope.tune.result import ConfirmRun, TrialRecord
from scalescope.tune.search import _attrs, record_of, records
from scalescope.tune.space import SpaceContext, parse_space
from scalescope.tune.study import TuneOptions, open_study
from scalescope.tune.trial import TrialResult

SPACE = parse_space(["bucket_cap_mb=5,25,100", "bind_to=domain,core"], SpaceContext(2, 8))
RAN = TrialResult("ok", 41.5, "samples/s", 96, 12.5, Path("/r/trial-0003"), None, True)


def test_the_outcome_is_every_field_a_confirmation_run_has_besides_what_ran() -> None:
    run = ConfirmRun(trial=3, round=2, **RAN.outcome())
    assert run == ConfirmRun(3, 2, "ok", 41.5, "samples/s", 12.5, "/r/trial-0003", None)
    shared = {f.name for f in fields(ConfirmRun)} - {"trial", "round"}
    assert set(RAN.outcome()) == shared
    assert shared <= {f.name for f in fields(TrialRecord)}


@pytest.mark.parametrize(
    "record",
    [
        TrialRecord(0, {}, "ok", 30.0, "samples/s", 9.0, "/r/0", baseline=True),
        TrialRecord(1, {"bucket_cap_mb": 5.0, "bind_to": "core"}, "failed", None, "samples/s",
                    3.0, "/r/1", error="RuntimeError: [oom]", seeded_by="LATENCY_BOUND"),
        TrialRecord(2, {"bucket_cap_mb": 100.0, "bind_to": "domain"}, "pruned", 12.0, "steps/s",
                    20.0, "/r/2", stopped_at_budget=True),
    ],
)  # fmt: skip
def test_a_record_reads_back_from_the_study_as_written(tmp_path: Path, record) -> None:
    study = open_study(tmp_path, TuneTarget(RunSpec(target=__file__)), SPACE, TuneOptions())
    for _ in range(record.number):  # trial numbers as in the study
        study.tell(study.ask(), 1.0)
    trial = study.ask()
    for name, value in _attrs(record).items():
        trial.set_user_attr(name, value)
    study.tell(trial, 1.0)
    resumed = open_study(tmp_path, TuneTarget(RunSpec(target=__file__)), SPACE,
                         TuneOptions(resume=True))  # fmt: skip
    assert records(resumed) == [record]
    assert record_of(resumed.trials[record.number]) == record
