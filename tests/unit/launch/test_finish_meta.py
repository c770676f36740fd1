"""The run's final status: the launcher's word, unless the ranks' own status files say the
run did not end well (a rank that turned a SIGTERM into a clean exit)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scalescope.events.files import rank_meta_path
from scalescope.events.run import RankMeta, RunMeta, load_run, write_json_atomic
from scalescope.launch.process.local import LaunchResult
from scalescope.launch.run.runner import finish_meta


def finished(
    tmp_path: Path,
    statuses: list[str],
    launcher: str = "completed",
    codes: dict[int, int] | None = None,
) -> RunMeta:
    """The launcher's record of ranks that wrote ``statuses`` (a failed rank with code 1)."""
    for rank, status in enumerate(statuses):
        path = rank_meta_path(tmp_path, rank)
        path.parent.mkdir(parents=True, exist_ok=True)
        code = 1 if status == "failed" else None
        write_json_atomic(path, RankMeta(rank=rank, hostname="h", status=status, exit_code=code))
    meta = RunMeta(run_id="r", command=["x"], script="t.py", world_size=len(statuses), probe=False)
    finish_meta(meta, tmp_path, LaunchResult(launcher, codes or {}))
    return meta


@pytest.mark.parametrize(
    ("ranks", "status"),
    [
        (["completed", "completed"], "completed"),
        (["completed", "interrupted"], "interrupted"),
        (["interrupted", "failed"], "failed"),
        (["killed", "completed"], "failed"),
    ],
)
def test_a_clean_launch_takes_the_ranks_word(tmp_path: Path, ranks: list[str], status: str) -> None:
    assert finished(tmp_path, ranks).status == status


def test_the_launchers_failure_stands(tmp_path: Path) -> None:
    assert finished(tmp_path, ["completed", "completed"], launcher="failed").status == "failed"


def test_a_rank_that_recorded_its_failure_keeps_its_code(tmp_path: Path) -> None:
    """Rank 0 failed on the closed connection first; the launcher then stopped rank 1, which
    had raised and was still writing: its SIGTERM code is a consequence."""
    meta = finished(tmp_path, ["failed", "failed"], "failed", codes={0: 1, 1: 143})
    assert (meta.ranks["1"].status, meta.ranks["1"].exit_code) == ("failed", 1)


def test_the_launchers_code_stands_for_a_rank_that_recorded_no_end(tmp_path: Path) -> None:
    meta = finished(tmp_path, ["failed", "running"], "failed", codes={0: 1, 1: -9})
    assert (meta.ranks["1"].status, meta.ranks["1"].exit_code) == ("killed", -9)


@pytest.mark.parametrize(
    ("launcher", "codes", "status"),
    [("failed", {1: -9}, "killed"), ("interrupted", {}, "interrupted")],
)
def test_a_loaded_run_reads_the_launchers_merge(
    tmp_path: Path, launcher: str, codes: dict[int, int], status: str
) -> None:
    """The rank's own file still says running (it could not write its end): the run as loaded
    says what the launcher saw."""
    meta = finished(tmp_path, ["completed", "running"], launcher, codes=codes)
    write_json_atomic(tmp_path / "run.json", meta)
    assert load_run(tmp_path).ranks[1].status == status


WORKER_DIED = "RuntimeError: DataLoader worker (pid 9) exited unexpectedly with exit code 130."


@pytest.mark.parametrize(
    ("own", "error"),
    [
        ("failed", f"stopped by signal 2; {WORKER_DIED}"),
        ("interrupted", f"stopped by SIGINT ({WORKER_DIED})"),
    ],
)
def test_a_worker_killed_by_the_users_signal_is_an_interruption_said_once(
    tmp_path: Path, own: str, error: str
) -> None:
    """The terminal's Ctrl-C reaches a DataLoader worker before its rank: a rank that
    recorded the worker's death as a failure is interrupted; one that already said so keeps
    its words."""
    path = rank_meta_path(tmp_path, 0)
    path.parent.mkdir(parents=True, exist_ok=True)
    words = WORKER_DIED if own == "failed" else f"stopped by SIGINT ({WORKER_DIED})"
    write_json_atomic(path, RankMeta(rank=0, hostname="h", status=own, error=words))
    meta = RunMeta(run_id="r", command=["x"], script="t.py", world_size=1, probe=False)
    finish_meta(meta, tmp_path, LaunchResult("interrupted", {}, signal=2))
    assert (meta.ranks["0"].status, meta.ranks["0"].error) == ("interrupted", error)
