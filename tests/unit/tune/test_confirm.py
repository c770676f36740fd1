"""The confirmation phase's pure logic: measurements and medians per configuration, the best by
median, the gain against the baseline's spread, which runs to do (and not to redo on resume),
and the runs kept in the study."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from scalescope.launch.run.runner import RunSpec
from scalescope.tune.apply import TuneTarget
from scalescope.tune.confirm import fresh_dir, store, stored
from scalescope.tune.result import ConfirmRun, TrialRecord, TuneResult, confirm_plan, to_confirm
from scalescope.tune.space import SpaceContext, parse_space
from scalescope.tune.study import TuneOptions, open_study

SPACE = parse_space(["bucket_cap_mb=5,25,100", "bind_to=domain,core"], SpaceContext(2, 8))


def record(number: int, rate: float | None, status: str = "ok", **kw) -> TrialRecord:
    config = {"bucket_cap_mb": [25.0, 5.0, 100.0][number % 3], "bind_to": "core"}
    return TrialRecord(number, config, status, rate, "samples/s", 1.0, f"t{number}", **kw)


def again(trial: int, round_: int, rate: float | None, status: str = "ok") -> ConfirmRun:
    return ConfirmRun(trial, round_, status, rate, "samples/s", 1.0, f"c{trial}-{round_}")


def middle(values: list[float]) -> float:
    """The median by hand: the middle value, or the mean of the two middle ones."""
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


# Trial 2 was lucky once (150) and is slow when run again; trial 1 is steadily faster.
RECORDS = (
    record(0, 100.0, baseline=True),
    record(1, 120.0),
    record(2, 150.0),
    record(3, 90.0),
    record(4, 60.0, "pruned"),
    record(5, None, "failed", error="OOM"),
)
RUNS = (
    again(0, 1, 104.0), again(1, 1, 118.0), again(2, 1, 95.0),
    again(2, 2, 99.0), again(1, 2, 125.0), again(0, 2, 98.0),
    again(1, 3, None, "failed"),
)  # fmt: skip


@pytest.fixture
def confirmed() -> TuneResult:
    return TuneResult("w", SPACE, RECORDS, "finished", confirmations=RUNS)


def test_measurements_are_the_trial_and_its_measured_runs(confirmed: TuneResult) -> None:
    r = {x.number: x for x in RECORDS}
    assert confirmed.measurements(r[1]) == [120.0, 118.0, 125.0]  # the failed run is left out
    assert confirmed.median(r[1]) == middle([120.0, 118.0, 125.0]) == 120.0
    assert confirmed.median(r[2]) == middle([150.0, 95.0, 99.0]) == 99.0
    assert confirmed.median(r[3]) == 90.0
    assert confirmed.measurements(r[4]) == [] and confirmed.median(r[5]) is None


def test_best_is_by_median_not_by_the_luckiest_trial(confirmed: TuneResult) -> None:
    assert confirmed.best.number == 1
    assert [r.number for r in confirmed.ranked()] == [1, 0, 2, 3, 4, 5]
    base = middle([100.0, 104.0, 98.0])
    assert confirmed.speedup(confirmed.best) == pytest.approx(middle([120, 118, 125]) / base)
    assert confirmed.baseline_spread() == pytest.approx(104.0 - 98.0)


def test_a_gain_beyond_the_baselines_spread_is_recommended(confirmed: TuneResult) -> None:
    # 120 - 100 = 20 samples/s > the baseline's spread of 6
    assert confirmed.significant(confirmed.best) and confirmed.recommended.number == 1


def test_a_gain_within_the_baselines_spread_keeps_the_configuration_as_given() -> None:
    runs = (again(0, 1, 125.0), again(0, 2, 80.0), again(1, 1, 119.0), again(1, 2, 121.0))
    result = TuneResult("w", SPACE, RECORDS[:2], "finished", confirmations=runs)
    assert result.best.number == 1  # 120 against the baseline's median of 100 ...
    assert result.baseline_spread() == pytest.approx(125.0 - 80.0)  # ... within its spread
    assert not result.significant(result.best) and result.recommended is None


def test_the_baseline_as_best_is_no_gain() -> None:
    runs = (again(0, 1, 130.0), again(1, 1, 100.0))
    result = TuneResult("w", SPACE, RECORDS[:2], "finished", confirmations=runs)
    assert result.best.number == 0 and result.recommended is None


def test_without_confirmation_the_single_trials_decide() -> None:
    result = TuneResult("w", SPACE, RECORDS, "finished")
    assert result.best.number == 2 and result.recommended.number == 2
    assert result.speedup(result.best) == pytest.approx(1.5)


def test_to_confirm_is_the_baseline_and_the_top_k(confirmed: TuneResult) -> None:
    plain = TuneResult("w", SPACE, RECORDS, "finished")
    assert [r.number for r in to_confirm(plain, 2)] == [0, 2, 1]
    assert [r.number for r in to_confirm(plain, 10)] == [0, 2, 1, 3]  # measured ones only
    assert to_confirm(plain, 0) == []
    assert [r.number for r in to_confirm(confirmed, 2)] == [0, 1, 2]  # by median once confirmed


def test_plan_interleaves_rounds_in_alternating_order() -> None:
    plain = TuneResult("w", SPACE, RECORDS, "finished")
    plan = confirm_plan(plain, to_confirm(plain, 2), 3)
    assert [(k, r.number) for k, r in plan] == [
        (1, 0), (1, 2), (1, 1), (2, 1), (2, 2), (2, 0), (3, 0), (3, 2), (3, 1),
    ]  # fmt: skip


def test_plan_skips_the_runs_a_resumed_study_already_has(confirmed: TuneResult) -> None:
    plan = confirm_plan(confirmed, to_confirm(confirmed, 3), 3)
    assert [(k, r.number) for k, r in plan] == [(1, 3), (2, 3), (3, 0), (3, 2), (3, 3)]
    # failed runs are done too: trial 1's third round is not repeated
    assert confirm_plan(confirmed, to_confirm(confirmed, 2), 2) == []


def test_runs_are_kept_in_the_study_across_resume(tmp_path: Path) -> None:
    target = TuneTarget(RunSpec(target=__file__))
    study = open_study(tmp_path, target, SPACE, TuneOptions())
    for run in RUNS[:3]:
        store(study, run)
    resumed = open_study(tmp_path, target, SPACE, TuneOptions(resume=True))
    assert stored(resumed) == RUNS[:3]
    store(resumed, replace(RUNS[3], error="x"))
    assert stored(open_study(tmp_path, target, SPACE, TuneOptions(resume=True)))[3].error == "x"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"confirm": -1}, "--confirm must"), ({"confirm_rounds": 0}, "--confirm-rounds must")],
)
def test_bad_confirm_options(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TuneOptions(**kwargs)


def test_an_interrupted_runs_directory_is_not_reused(tmp_path: Path) -> None:
    wanted = tmp_path / "trial-0003-confirm-1"
    assert fresh_dir(wanted) == wanted
    wanted.mkdir()
    (tmp_path / "trial-0003-confirm-1-2").mkdir()
    assert fresh_dir(wanted) == tmp_path / "trial-0003-confirm-1-3"


def test_a_configuration_short_of_measurements_is_never_named_best(confirmed: TuneResult) -> None:
    full = replace(confirmed, required_runs=3)
    # trial 3 (90, one run) and the lucky trial 2 before its runs: not eligible
    lucky = replace(full, confirmations=RUNS[:2])
    assert lucky.by_median()[0].number == 2 and not lucky.confirmed(lucky.records[2])
    assert lucky.unconfirmed_leader.number == 2
    assert lucky.best.number == 0 and lucky.recommended is None  # trial 1 has 2 of 3 too
    assert full.best.number == 1 and full.recommended.number == 1
    assert full.unconfirmed_leader is None


class Listener:
    def __init__(self) -> None:
        self.started: list[tuple[int, int]] = []

    def confirm_starts(self, done: int, total: int, round_: int, record: TrialRecord) -> None:
        self.started.append((record.number, round_))

    def confirm_ends(self, run: ConfirmRun) -> None:
        pass


def search_of(tmp_path: Path, speeds: dict[int, list[float]], over_budget: bool = False):
    """A search whose confirmation runs measure ``speeds[trial]`` in turn (no ranks start:
    the loop's choices are what is tested)."""
    from types import SimpleNamespace

    target = TuneTarget(RunSpec(target=__file__))
    options = TuneOptions(confirm=1, confirm_rounds=2)
    search = SimpleNamespace(
        options=options, listener=Listener(), study=open_study(tmp_path, target, SPACE, options),
        over_budget=lambda: over_budget,
    )  # fmt: skip

    def run(_search, record: TrialRecord, round_: int) -> ConfirmRun:
        return again(record.number, round_, speeds[record.number].pop(0))

    return search, run


def test_the_leader_by_median_is_confirmed_until_the_best_has_every_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from scalescope.tune import confirm as confirm_module

    records = (record(0, 100.0, baseline=True), record(1, 150.0), record(2, 140.0))
    # --confirm 1 runs the baseline and trial 1; trial 1 falls to 90, so trial 2 (140, one
    # run) leads and is confirmed next: 138 and 60, median 138.
    speeds = {0: [101.0, 99.0], 1: [90.0, 92.0], 2: [138.0, 60.0]}
    search, run = search_of(tmp_path, speeds)
    monkeypatch.setattr(confirm_module, "confirm_run", run)
    result = confirm_module.confirm(search, TuneResult("w", SPACE, records, "finished"))
    assert search.listener.started == [(0, 1), (1, 1), (1, 2), (0, 2), (2, 1), (2, 2)]
    assert result.required_runs == 3
    assert result.best.number == 2 and result.median(result.best) == 138.0
    assert result.recommended.number == 2


def test_past_the_budget_the_leader_is_not_confirmed_nor_recommended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from scalescope.tune import confirm as confirm_module

    records = (record(0, 100.0, baseline=True), record(1, 150.0), record(2, 140.0))
    speeds = {0: [101.0, 99.0], 1: [90.0, 92.0]}
    search, run = search_of(tmp_path, speeds, over_budget=True)
    monkeypatch.setattr(confirm_module, "confirm_run", run)
    result = confirm_module.confirm(search, TuneResult("w", SPACE, records, "finished"))
    assert (2, 1) not in search.listener.started
    assert result.unconfirmed_leader.number == 2
    assert result.best.number == 0 and result.recommended is None  # the baseline, 100 > 92


def test_a_leading_baseline_keeps_the_configuration_as_given(confirmed: TuneResult) -> None:
    """The baseline (one failed confirmation run: 2 of 3 measurements) leads: no gain."""
    runs = (again(0, 1, 130.0), again(0, 2, None, "failed"), again(1, 1, 100.0))
    result = TuneResult("w", SPACE, RECORDS[:2], "finished", confirmations=runs, required_runs=3)
    assert result.best.number == 0 and result.unconfirmed_leader is None
    assert result.recommended is None
