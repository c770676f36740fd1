"""`scalescope top --once` while real ranks are held before their first step: each rank is
``starting`` with the stage it is in (import, init_process_group, model), never SILENT; then
completed."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import SCRIPTS, scalescope, start_scalescope

SLOW_START = SCRIPTS / "slow_start.py"


def statuses(text: str) -> dict[int, str]:
    """Each rank row's status cell (``starting (model, 3 s)``, ``completed``)."""
    found = {}
    for line in text.splitlines():
        match = re.match(r"\s*(\d+)\*?\s+(starting \([^)]*\)|starting|[A-Za-z]+)\s", line)
        if match:
            found[int(match.group(1))] = match.group(2)
    return found


def top_until(
    run_dir: Path, ok: Callable[[dict[int, str]], bool], proc: subprocess.Popen, what: str
) -> tuple[dict[int, str], list[str]]:
    """``top --once`` again until its rank statuses are ``ok``; every frame seen."""
    frames: list[str] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if (run_dir / "run.json").exists():
            done = scalescope("top", str(run_dir), "--once", cwd=run_dir.parent, timeout=60)
            assert done.returncode == 0, done.stderr
            frames.append(done.stdout)
            if ok(statuses(done.stdout)):
                return statuses(done.stdout), frames
        assert proc.poll() is None, f"the run ended before top showed {what}"
        time.sleep(0.3)
    raise AssertionError(f"top never showed {what}:\n{frames[-1] if frames else ''}")


@pytest.mark.heavy
def test_ranks_held_before_their_first_step_are_starting_with_their_stage(
    tmp_path: Path,
) -> None:
    run_dir, go_init, go_model = tmp_path / "run", tmp_path / "go-init", tmp_path / "go-model"
    go_rank = [tmp_path / "go-init.0", tmp_path / "go-init.1"]
    proc = start_scalescope(
        "run", "-n", "2", "--no-report", "--run-dir", str(run_dir), str(SLOW_START),
        "--go-init", str(go_init), "--go-model", str(go_model), cwd=tmp_path,
    )  # fmt: skip
    try:
        seen, frames = top_until(
            run_dir,
            lambda s: len(s) == 2 and all(v.startswith("starting (import") for v in s.values()),
            proc, "both ranks importing",
        )  # fmt: skip
        go_rank[0].touch()  # rank 0 then waits for rank 1 in the rendezvous
        seen, more = top_until(
            run_dir,
            lambda s: s.get(0, "").startswith("starting (init_process_group")
            and s.get(1, "").startswith("starting (import"),
            proc, "rank 0 in init_process_group, rank 1 importing",
        )  # fmt: skip
        frames += more
        go_rank[1].touch()
        seen, more = top_until(
            run_dir,
            lambda s: len(s) == 2 and all(v.startswith("starting (model") for v in s.values()),
            proc, "both ranks building their model",
        )  # fmt: skip
        frames += more
        assert all(re.fullmatch(r"starting \(model, \d+ s\)", v) for v in seen.values()), seen
        go_model.touch()
        out, err = proc.communicate(timeout=120)
    finally:
        for go in (*go_rank, go_model):
            go.touch()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert not any("SILENT" in f for f in frames), frames[-1]
    final = scalescope("top", str(run_dir), "--once", cwd=tmp_path, timeout=60)
    assert statuses(final.stdout) == {0: "completed", 1: "completed"}, final.stdout
