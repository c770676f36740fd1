"""The run's final status: the launcher's word, unless the ranks' own status files say the
run did not end well (a rank that turned a SIGTERM into a clean exit)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scalescope.events.files import rank_meta_path
from scalescope.events.run import RankMeta, RunMeta, write_json_atomic
from scalescope.launch.local import LaunchResult
from scalescope.launch.runner import finish_meta


def finished(tmp_path: Path, statuses: list[str], launcher: str = "completed") -> RunMeta:
    for rank, status in enumerate(statuses):
        path = rank_meta_path(tmp_path, rank)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(path, RankMeta(rank=rank, hostname="h", status=status))
    meta = RunMeta(run_id="r", command=["x"], script="t.py", world_size=len(statuses))
    finish_meta(meta, tmp_path, LaunchResult(launcher, {}))
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
