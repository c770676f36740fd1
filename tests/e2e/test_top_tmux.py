"""`scalescope top` and `run --live` in a real terminal (tmux): rows, straggler, a crash, q, Ctrl-C.

One real run serves the attach tests: two ranks, rank 1 late in its DataLoader by a known
sleep, and rank 1 raising mid-run. `top` is attached to it while it trains.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from conftest import DDP_TRAIN, cli_env

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

CLI = f"{shlex.quote(sys.executable)} -m scalescope.cli"
FAIL_STEP = 260
TRAIN_ARGS = [
    *("--steps", "400", "--sleep-rank", "1", "--sleep-s", "0.03", "--sleep-where", "data"),
    *("--fail-rank", "1", "--fail-step", str(FAIL_STEP)),
]


def pane_env() -> dict[str, str]:
    """The tests' environment less COLUMNS and LINES: pytest-xdist's workers carry 80x24,
    which would size the view instead of the pane."""
    return {k: v for k, v in cli_env().items() if k not in ("COLUMNS", "LINES")}


class Pane:
    """A command in its own tmux server and 160x50 window, kept after it exits."""

    def __init__(self, command: str, cwd: Path) -> None:
        self.socket = f"sstest-{uuid.uuid4().hex[:8]}"
        self.tmux("new-session", "-d", "-s", "t", "-x", "160", "-y", "50", "-c", str(cwd),
                  f"{command}; sleep 600")  # fmt: skip
        self.pane_pid = self.tmux("display", "-p", "-t", "t", "#{pane_pid}").strip()

    def tmux(self, *args: str) -> str:
        cmd = ["tmux", "-L", self.socket, "-f", "/dev/null", *args]
        done = subprocess.run(cmd, env=pane_env(), capture_output=True, text=True, check=True)
        return done.stdout

    def text(self) -> str:
        return self.tmux("capture-pane", "-p", "-J", "-S", "-300", "-t", "t")

    def wait_for(self, ok: Callable[[str], bool], timeout: float, what: str) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            text = self.text()
            if ok(text):
                return text
            time.sleep(0.5)
        raise AssertionError(f"the pane never showed {what}:\n{self.text()}")

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "t", *keys)

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True)


def exit_status_shown(text: str) -> int | None:
    match = re.search(r"^EXIT=(\d+)\s*$", text, re.MULTILINE)
    return int(match.group(1)) if match else None


def exited(pane: Pane, timeout: float) -> int:
    """The exit status the pane's shell printed."""
    text = pane.wait_for(lambda t: exit_status_shown(t) is not None, timeout, "the exit status")
    status = exit_status_shown(text)
    assert status is not None
    return status


def rank_rows(text: str) -> dict[str, list[str]]:
    """The rows of the rank table, by rank label (``1*`` marks the straggler)."""
    rows = {}
    for line in text.splitlines():
        cells = line.split()
        if len(cells) >= 3 and re.fullmatch(r"\d+\*?", cells[0]) and cells[2].isdigit():
            rows[cells[0]] = cells
    return rows


@pytest.fixture(scope="module")
def crashing_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Pane]]:
    """The run in the background and `top` attached to it in tmux."""
    root = tmp_path_factory.mktemp("top")
    run_dir = root / "run"
    cmd = [sys.executable, "-m", "scalescope.cli", "run", "-n", "2", "--no-report",
           "--run-dir", str(run_dir), str(DDP_TRAIN), *TRAIN_ARGS]  # fmt: skip
    log = open(root / "run.log", "w")  # noqa: SIM115
    proc = subprocess.Popen(cmd, cwd=root, env=cli_env(), stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while not (run_dir / "run.json").exists():
        assert proc.poll() is None and time.monotonic() < deadline, (root / "run.log").read_text()
        time.sleep(0.2)
    pane = Pane(f"{CLI} top run; echo EXIT=$?", root)
    yield run_dir, pane
    pane.close()
    proc.wait(timeout=300)
    log.close()


def test_top_shows_the_ranks_and_the_straggler_then_the_crash(crashing_run) -> None:
    run_dir, pane = crashing_run
    text = pane.wait_for(
        lambda t: "verdict so far: straggler [rank 1]" in t and len(rank_rows(t)) == 2
        and all(int(r[2]) > 0 for r in rank_rows(t).values()),
        timeout=240, what="both ranks stepping and rank 1 as the straggler",
    )  # fmt: skip
    assert "1*" in rank_rows(text), text  # the straggler's row is marked
    assert rank_rows(text)["1*"][4].startswith("ddd"), text  # late loading data
    assert "scalescope top run  running" in text
    assert re.search(r"samples/s now [\d,.]+, mean [\d,.]+", text), text
    text = pane.wait_for(lambda t: "FAILED" in t, timeout=240, what="rank 1 marked FAILED")
    assert f"rank 1 failed: RuntimeError: deliberate failure on rank 1 at step {FAIL_STEP}" in text
    assert rank_rows(text)["1*" if "1*" in rank_rows(text) else "1"][1] == "FAILED"
    pane.keys("C-c")
    assert exited(pane, 30) == 130


def test_top_of_a_finished_run_quits_with_q(crashing_run) -> None:
    run_dir, _ = crashing_run
    deadline = time.monotonic() + 240
    while '"status": "running"' in (run_dir / "run.json").read_text():
        assert time.monotonic() < deadline
        time.sleep(0.5)
    pane = Pane(f"{CLI} top run; echo EXIT=$?", run_dir.parent)
    try:
        text = pane.wait_for(lambda t: "scalescope top run  failed" in t, 60, "the header")
        assert rank_rows(text)
        pane.keys("q")
        assert exited(pane, 30) == 0
    finally:
        pane.close()


@pytest.mark.heavy
def test_run_live_draws_the_view_above_the_output(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(DDP_TRAIN.read_text() + "\nprint('LAST WORDS OF RANK 0', flush=True)\n")
    args = "--steps 120 --sleep-rank 0 --sleep-s 0.02 --sleep-where forward"
    pane = Pane(f"{CLI} run --live -n 2 --no-report --run-dir live {script} {args}; "
                "echo EXIT=$?", tmp_path)  # fmt: skip
    try:
        assert exited(pane, 300) == 0
        text = pane.text()
        rows = rank_rows(text)
        assert {r.rstrip("*") for r in rows} == {"0", "1"}, text
        assert all(r[1] == "completed" and r[2] == "120" for r in rows.values()), text
        assert "LAST WORDS OF RANK 0" in text  # rank 0's output below the view
        assert "the ranks' output: live/logs" in text
        logs = sorted(p.parent.name for p in (tmp_path / "live" / "logs").rglob("stdout.log"))
        assert logs == ["0", "1"]
    finally:
        pane.close()
