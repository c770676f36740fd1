"""`scalescope flush RUN_DIR` on a real 2-rank run at `--record summary`: each rank writes
its flight recorder's rows of the steps its stream holds as summaries
(events/window-*-rank-N.arrows, probe/ring_flush.py) and answers; once the run ended, those
steps load with their full rows beside the regular windows (events/kept_windows.py), their
calls as many as their summaries say, and the what-if replays them and says which they are.
A rank number that is not running is one line and exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest
from waiting import wait_for

from conftest import SCRIPTS, cli_env, scalescope
from scalescope.events import Kind, load_run
from scalescope.events.live_state import read_live_states
from scalescope.events.reader import read_event_stream
from scalescope.probe.windows import WINDOWS_VARIABLE, Windows
from scalescope.report.views.whatif import windows_line

RANKS, STEPS, FLUSH_AT = 2, 120, 30
WINDOWS = Windows(first=4, every=20, width=2)


@pytest.fixture(scope="module")
def flushed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("flush")
    run_dir = tmp / "run"
    env = cli_env() | {WINDOWS_VARIABLE: f"{WINDOWS.first}:{WINDOWS.every}:{WINDOWS.width}"}
    cmd = [
        sys.executable, "-m", "scalescope.cli", "run", "-n", str(RANKS), "--run-dir", run_dir,
        "--record", "summary", "--no-report", "--slowdown-threshold", "0",
        SCRIPTS / "ddp_train.py", "--steps", str(STEPS), "--sleep-rank", "1", "--sleep-s", "0.05",
    ]  # fmt: skip
    proc = subprocess.Popen(list(map(str, cmd)), cwd=tmp, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        wait_for(
            lambda: len(states := read_live_states(run_dir, RANKS)) == RANKS
            and min(s.steps_done for s in states.values()) >= FLUSH_AT,
            f"{FLUSH_AT} steps on both ranks", seconds=180.0,
        )  # fmt: skip
        asked = scalescope("flush", run_dir, cwd=tmp, timeout=120)
        wrong = scalescope("flush", run_dir, "--rank", "7", cwd=tmp, timeout=120)
        _, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-3000:]
    report = scalescope("report", run_dir, "--json", tmp / "r.json", cwd=tmp, timeout=240)
    assert report.returncode == 0, report.stderr[-3000:]
    return run_dir, asked, wrong, report.stdout, json.loads((tmp / "r.json").read_text())


def window_steps(run_dir, rank: int) -> list[int]:
    """The steps whose STEP row the rank's flushed window holds."""
    [path] = sorted((run_dir / "events").glob(f"window-*-rank-{rank:05d}.arrows"))
    table = read_event_stream(path).table
    kind, step = table["kind"].to_numpy(), table["step"].to_numpy()
    return sorted(step[kind == int(Kind.STEP)].tolist())


def test_each_rank_writes_its_summarised_steps_and_answers(flushed):
    run_dir, asked, _, _, _ = flushed
    assert asked.returncode == 0, asked.stderr
    assert asked.stdout.startswith("flushed: ranks 0-1 ")
    for rank in range(RANKS):
        steps = window_steps(run_dir, rank)
        last = steps[-1]
        assert last >= FLUSH_AT - 1, "every step ended before the request"
        assert steps == [s for s in range(WINDOWS.first, last + 1) if not WINDOWS.full(s)]
        path = run_dir / "events" / f"window-{WINDOWS.first:06d}-rank-{rank:05d}.arrows"
        assert path.is_file(), "named by its first step"


def test_a_rank_that_is_not_running_is_one_line_and_exit_2(flushed):
    wrong = flushed[2]
    assert wrong.returncode == 2
    assert wrong.stderr.strip().splitlines() == ["error: no running rank to ask (rank 7)"]


def test_the_kept_steps_load_with_as_many_calls_as_their_summaries(flushed):
    run_dir = flushed[0]
    run = load_run(run_dir)
    common = sorted(set(window_steps(run_dir, 0)) & set(window_steps(run_dir, 1)))
    assert list(run.kept_steps) == common
    ev = run.events
    names = np.array(ev.strings("name"))
    for rank in range(RANKS):
        for step in (common[0], common[-1]):
            at = (ev.rank == rank) & (ev.step == step)
            calls = Counter(names[at & (ev.kind == int(Kind.COLLECTIVE))].tolist())
            summary = at & (ev.kind == int(Kind.SUMMARY))
            folded: Counter = Counter()
            for name, count in zip(names[summary], ev.count[summary], strict=True):
                folded[name] += int(count)
            assert calls == folded and calls, (rank, step)


def test_the_whatif_replays_them_and_says_which(flushed):
    run_dir, _, _, text, report = flushed
    whatif = report["whatif"]
    kept = [s for s in load_run(run_dir).kept_steps if s in whatif["windows"]]
    assert whatif["kept"] == kept and len(kept) >= 10
    regular = [s for s in whatif["windows"] if s not in kept]
    assert all(WINDOWS.full(s) for s in regular) and np.all(np.diff(whatif["windows"]) > 0)
    words = " ".join(text.split())  # the terminal's lines joined
    spans = windows_line(tuple(whatif["windows"]), tuple(kept))
    assert spans in words and "kept by the flight recorders: events/window-*" in spans
