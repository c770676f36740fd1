"""A rank's status in the live view: starting (with its stage and time in it), running,
silent, dead."""

from __future__ import annotations

from scalescope.analyze.live import SILENT_AFTER_S, rank_live
from scalescope.events.live_state import IMPORT, INIT_PROCESS_GROUP, MODEL, RUNNING, LiveState
from scalescope.events.run import RankMeta
from scalescope.events.tail import RankTotals

NOW = 10_000.0
RUN_START = NOW - 53


def state(stage: str, since: float | None, steps: int = 0) -> LiveState:
    return LiveState(
        rank=0, pid=1, steps_done=steps, last_step_end_s=None, phase="outside",
        phase_since_s=None, op="", group="", seq=0, nbytes=0, entered_s=None, left_s=None,
        last_done_s=None, stage=stage, stage_since_s=since,
    )  # fmt: skip


def status_of(
    live: LiveState | None = None,
    meta: RankMeta | None = None,
    totals: RankTotals | None = None,
    silent_s: float | None = None,
    alive: bool | None = True,
):
    return rank_live(0, None, totals, meta, alive, silent_s, live, RUN_START, NOW)


def test_nothing_written_yet_is_importing_since_the_run_started() -> None:
    r = status_of(alive=None)
    assert (r.status, r.stage, r.stage_for_s) == ("starting", IMPORT, 53.0)
    assert r.status_words == "starting (import, 53 s)"
    assert r.last_words is None


def test_each_stage_with_its_time_and_never_silent() -> None:
    meta = RankMeta(rank=0, start_time=NOW - 40)
    for stage in (IMPORT, INIT_PROCESS_GROUP, MODEL):
        r = status_of(state(stage, NOW - 12), meta, silent_s=10 * SILENT_AFTER_S)
        assert (r.status, r.stage, r.stage_for_s) == ("starting", stage, 12.0)
    assert r.status_words == "starting (model, 12 s)"


def test_running_once_the_first_step_began() -> None:
    r = status_of(state(RUNNING, NOW - 2), RankMeta(rank=0), silent_s=3.0)
    assert (r.status, r.stage, r.stage_for_s, r.status_words) == ("running", None, None, "running")


def test_in_a_long_first_step_with_nothing_written_is_running_not_silent() -> None:
    r = status_of(state(RUNNING, NOW - 60), RankMeta(rank=0), silent_s=60.0)
    assert r.status == "running"


def test_silent_only_after_writing_steps() -> None:
    totals = RankTotals(steps=40, last_step=39)
    r = status_of(state(RUNNING, NOW - 90, steps=40), RankMeta(rank=0), totals, silent_s=20.0)
    assert (r.status, r.last_words) == ("silent", "no events for 20 s")
    r = status_of(state(RUNNING, NOW - 90, steps=40), RankMeta(rank=0), totals, silent_s=3.0)
    assert r.status == "running"


def test_dead_or_ended_ranks_are_not_starting() -> None:
    assert status_of(state(MODEL, NOW - 5), RankMeta(rank=0), alive=False).status == "died"
    failed = RankMeta(rank=0, status="failed", error="RuntimeError: no rendezvous")
    r = status_of(state(INIT_PROCESS_GROUP, NOW - 5), failed)
    assert (r.status, r.stage, r.last_words) == ("failed", None, "RuntimeError: no rendezvous")


def test_without_stages_the_steps_tell() -> None:
    """A live state file from before the stages (stage ""), or none readable."""
    meta = RankMeta(rank=0, start_time=NOW - 7)
    r = status_of(state("", None), meta)
    assert (r.status, r.stage, r.stage_for_s, r.status_words) == (
        "starting", None, 7.0, "starting (7 s)",
    )  # fmt: skip
    assert status_of(state("", None, steps=3), meta).status == "running"
    assert status_of(None, meta, RankTotals(steps=3, last_step=2), silent_s=1.0).status == (
        "running"
    )
    assert status_of(None, RankMeta(rank=0, probe=False)).status == "running"  # --no-probe
