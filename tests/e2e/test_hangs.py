"""Hangs seen live by the launcher (--hang-after), the verdict, the stacks, the report; a
job whose ranks never synchronise; Ctrl-C of a whole job. Real gloo ranks, short hangs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from conftest import SCRIPTS, cli_env, scalescope
from scalescope.events import Kind, load_run
from scalescope.events.live_state import read_live_states

HANG_TRAIN = SCRIPTS / "hang_train.py"
REPLICAS_TRAIN = SCRIPTS / "replicas_train.py"


def start_job(*args: str, cwd: Path) -> subprocess.Popen:
    """The CLI in a session of its own, so a test can Ctrl-C the whole job as a terminal does
    (SIGINT to every process of the foreground group: launcher, ranks, loader workers)."""
    cmd = [sys.executable, "-m", "scalescope.cli", *map(str, args)]
    return subprocess.Popen(
        cmd, cwd=cwd, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip


def wait_until(check, timeout: float = 120.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def recorded_steps(run, rank: int) -> list[int]:
    ev = run.events
    return ev.step[(ev.rank == rank) & (ev.kind == Kind.STEP)].tolist()


def still_running(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            pass
    return alive


def assert_no_process_left(pids: list[int]) -> None:
    alive = still_running(pids)
    assert not alive, f"processes still running: {alive}"


def hang_run(tmp: Path, mode: str, action: str = "kill", at: int = 6) -> dict:
    proc = scalescope(
        "run", "-n", "2", "--run-dir", "run", "--hang-after", "3", "--hang-action", action,
        "--no-report", HANG_TRAIN, "--mode", mode, "--at", at, cwd=tmp, timeout=180,
    )  # fmt: skip
    hang = json.loads((tmp / "run" / "hang.json").read_text())
    return {"proc": proc, "hang": hang, "run": load_run(tmp / "run"), "dir": tmp / "run"}


@pytest.fixture(scope="module")
def host_hang(tmp_path_factory) -> dict:
    """Rank 1 sleeps in host work before its 7th step; rank 0 waits in all_reduce."""
    return hang_run(tmp_path_factory.mktemp("host"), "host")


@pytest.fixture(scope="module")
def mismatch(tmp_path_factory) -> dict:
    """At its 7th step rank 1 calls broadcast where rank 0 calls all_reduce."""
    return hang_run(tmp_path_factory.mktemp("mismatch"), "mismatch")


def test_host_hang_verdict_names_the_rank_and_the_collective(host_hang):
    hang, proc = host_hang["hang"], host_hang["proc"]
    assert proc.returncode == 1, proc.stderr
    verdict = hang["verdicts"][0]
    assert verdict["kind"] == "missing" and verdict["ranks"] == [1] and verdict["waiting"] == [0]
    assert verdict["op"] == "all_reduce" and verdict["group"] == "0"
    ranks = {r["rank"]: r for r in hang["ranks"]}
    assert ranks[0]["in_collective"] and ranks[0]["seq"] == verdict["seq"]
    assert not ranks[1]["in_collective"] and ranks[1]["seq"] == verdict["seq"] - 1
    assert ranks[1]["phase"] == "outside" and ranks[1]["steps_done"] == 6
    assert ranks[0]["steps_done"] == 6
    assert hang["idle_s"] >= 3.0 and ranks[0]["collective_for_s"] >= 3.0
    text = proc.stderr
    assert "rank 1 has not entered all_reduce #" in text
    assert "that rank 0 waits in for" in text
    assert "rank 1 is in host work (outside the recorded phases) since step 6" in text


def test_host_hang_lists_each_ranks_last_calls_from_its_flight_recorder(host_hang):
    """Both ranks last completed the user all_reduce after their 6th optimizer step (the step
    numbered 6 begins there), one before the call rank 0 waits in: the rings say what the
    live states' single call cannot."""
    hang, text = host_hang["hang"], host_hang["proc"].stderr
    seq = hang["verdicts"][0]["seq"]
    for r in hang["ranks"]:
        last = r["last_calls"][0]
        assert (last["op"], last["group"], last["seq"], last["step"]) == ("all_reduce", "0",
                                                                          seq - 1, 6)  # fmt: skip
        assert last["dur_s"] is not None and r["ring_note"] == ""
        assert [c["seq"] for c in r["last_calls"]] == list(range(seq - 1, seq - 6, -1))
        assert (
            f"rank {r['rank']}'s last calls (flight recorder, latest first): all_reduce "
            f"#{seq - 1} (group 0, " in text
        )


def test_host_hang_stacks_show_where_each_rank_is(host_hang):
    ranks = {r["rank"]: r for r in host_hang["hang"]["ranks"]}
    sleep_line = next(
        i
        for i, line in enumerate(HANG_TRAIN.read_text().splitlines(), 1)
        if "time.sleep(args" in line
    )
    assert f'hang_train.py", line {sleep_line} in main' in ranks[1]["stack"]
    assert "in backward" in ranks[0]["stack"]  # DDP's bucket all_reduce waits in backward
    assert (host_hang["dir"] / "hang.txt").read_text().startswith("HANG: no rank finished")


def test_host_hang_keeps_every_step_and_leaves_no_process(host_hang):
    run = host_hang["run"]
    for r in host_hang["hang"]["ranks"]:
        assert recorded_steps(run, r["rank"]) == list(range(r["steps_done"]))
    assert_no_process_left([r["pid"] for r in host_hang["hang"]["ranks"]])
    meta = run.meta.ranks["1"]
    assert "stopped by scalescope after a hang" in (run.ranks[1].error or meta.error)


def test_report_of_a_hung_run_puts_the_hang_first(host_hang):
    page = host_hang["dir"].parent / "dash.html"
    proc = scalescope("report", host_hang["dir"], "--html", page, cwd=host_hang["dir"].parent)
    html = page.read_text()
    assert html.index('<pre id="hang">HANG: no rank finished') < html.index('id="failures"')
    out = proc.stdout
    assert proc.returncode == 0, proc.stderr
    assert out.index("HANG: no rank finished") < out.index("Failures")
    findings = out[out.index("Findings") :]
    assert findings.split("\n", 2)[1].startswith("1. hang: the run stopped progressing")
    assert "verdict: hang:" in out
    assert "communication latency" not in out.split("verdict:")[-1]


@pytest.mark.heavy
def test_a_hang_before_the_first_step_is_seen(tmp_path):
    """Rank 1 sleeps before its first step, after DDP's broadcast of the parameters (#0):
    rank 0 waits in the first gradient all_reduce (#1) with no step done on either rank."""
    hung = hang_run(tmp_path, "host", at=0)
    assert hung["proc"].returncode == 1, hung["proc"].stderr
    verdict = hung["hang"]["verdicts"][0]
    assert verdict["kind"] == "missing" and verdict["ranks"] == [1] and verdict["waiting"] == [0]
    ranks = {r["rank"]: r for r in hung["hang"]["ranks"]}
    assert ranks[0]["in_collective"] and ranks[0]["steps_done"] == ranks[1]["steps_done"] == 0
    assert ranks[0]["collective_for_s"] >= 3.0
    assert "rank 1 has not entered all_reduce #1" in hung["proc"].stderr
    assert_no_process_left([r["pid"] for r in ranks.values()])


@pytest.mark.heavy
def test_mismatch_names_both_ops(mismatch):
    verdict = mismatch["hang"]["verdicts"][0]
    assert verdict["kind"] == "mismatch"
    assert {verdict["op"], verdict["other_op"]} == {"all_reduce", "broadcast"}
    assert verdict["op"] == "all_reduce" and verdict["waiting"] == [0] and verdict["ranks"] == [1]
    assert "rank 0 called all_reduce, rank 1 called broadcast with the same sequence number" in (
        mismatch["proc"].stderr
    )
    assert_no_process_left([r["pid"] for r in mismatch["hang"]["ranks"]])


@pytest.mark.heavy
def test_ctrl_c_during_a_reported_hang(tmp_path):
    """--hang-action report leaves the ranks running; the user then presses Ctrl-C."""
    proc = start_job(
        "run", "-n", "2", "--run-dir", "run", "--hang-after", "3", "--no-report", HANG_TRAIN,
        "--mode", "host", cwd=tmp_path,
    )  # fmt: skip
    wait_until((tmp_path / "run" / "hang.json").exists, what="hang.json")
    pids = [s.pid for s in read_live_states(tmp_path / "run", 2).values()]
    assert all(psutil.pid_exists(p) for p in pids), "report mode must not stop the ranks"
    os.killpg(proc.pid, signal.SIGINT)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGINT, err
    run = load_run(tmp_path / "run")
    assert run.meta.status == "interrupted"
    for rank in (0, 1):
        assert run.ranks[rank].status == "interrupted", run.ranks[rank].error
        assert recorded_steps(run, rank) == list(range(run.ranks[rank].steps))
    assert_no_process_left(pids)
    report = scalescope("report", "run", cwd=tmp_path).stdout
    assert report.index("HANG: no rank finished") < report.index("Failures")


@pytest.mark.heavy
def test_independent_replicas_and_ctrl_c_of_a_public_script_structure(tmp_path):
    """imagenet/main.py's structure on CPU: a process group, no DDP, DataLoader workers."""
    proc = start_job(
        "run", "-n", "2", "--run-dir", "run", REPLICAS_TRAIN, "-a", "resnet18", "-b", "4",
        "--dummy", "-j", "1", "--image-size", "32", cwd=tmp_path,
    )  # fmt: skip

    def steps_done() -> bool:
        states = read_live_states(tmp_path / "run", 2)
        return len(states) == 2 and all(s.steps_done >= 6 for s in states.values())

    wait_until(steps_done, what="6 steps on each rank")
    pids = [s.pid for s in read_live_states(tmp_path / "run", 2).values()]
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGINT, err
    run = load_run(tmp_path / "run")
    for rank in (0, 1):
        meta = run.ranks[rank]
        assert meta.status == "interrupted", meta.error
        assert meta.error.startswith("stopped by SIGINT")
        assert recorded_steps(run, rank) == list(range(meta.steps))
    assert "first to fail" not in out
    findings = out[out.index("Findings") :]
    assert findings.split("\n", 2)[1].startswith(
        "1. no data parallelism: the ranks never synchronise gradients"
    )
    assert "DistributedDataParallel(model)" in findings
    ev = run.events
    forward = (ev.kind == Kind.PHASE) & (ev.name == ev.symbols.id_of("forward"))
    for rank in (0, 1):
        steps = set(ev.step[forward & (ev.rank == rank)].tolist())
        assert set(range(1, run.ranks[rank].steps)) <= steps, "forward from the 2nd step on"
    assert_no_process_left(pids)


@pytest.mark.heavy
def test_ctrl_c_before_the_threshold_names_the_hang_from_the_events(tmp_path):
    """The default threshold (30 s at least) is not reached: Ctrl-C after rank 0 waited 6 s in
    the all_reduce rank 1 never entered. Rank 1, in host work, exits on SIGINT first, which
    ends rank 0's wait with gloo's 'connection closed'; the report still names the hang, from
    the events, as its first finding and verdict."""
    proc = start_job(
        "run", "-n", "2", "--run-dir", "run", "--no-report", HANG_TRAIN, "--mode", "host",
        "--at", "3", cwd=tmp_path,
    )  # fmt: skip

    def waited_6_s() -> bool:
        states = read_live_states(tmp_path / "run", 2)
        zero = states.get(0)
        return bool(zero and zero.in_collective and time.time() - zero.entered_s > 6.0)

    wait_until(waited_6_s, what="rank 0 waiting 6 s in its collective")
    os.killpg(proc.pid, signal.SIGINT)
    proc.communicate(timeout=120)
    assert not (tmp_path / "run" / "hang.json").exists(), "the launcher's threshold was not met"
    done = scalescope("report", "run", "--json", "r.json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["hang"]["source"] == "events"
    [verdict] = doc["hang"]["verdicts"]
    assert (verdict["kind"], verdict["ranks"], verdict["waiting"]) == ("missing", [1], [0])
    assert doc["diagnosis"]["findings"][0]["code"] == "HANG"
    assert "HANG: no rank finished" in done.stdout


@pytest.mark.heavy
def test_a_checkpoint_pause_is_not_a_hang(tmp_path):
    """Rank 0 sleeps 12 s after every 4th optimizer step (a checkpoint); the other waits in
    the next all_reduce. 10 typical steps are about 0.3 s, but the default threshold is at
    least 30 s: the launcher's watch stays quiet, and the report calls it a pause."""
    proc = scalescope(
        "run", "-n", "2", "--run-dir", "run", "--no-report", HANG_TRAIN, "--mode", "pause",
        "--rank", "0", "--every", "4", "--sleep-s", "12", "--steps", "9", cwd=tmp_path,
        timeout=180,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "run" / "hang.json").exists()
    assert scalescope("report", "run", "--json", "r.json", cwd=tmp_path).returncode == 0
    doc = json.loads((tmp_path / "r.json").read_text())
    findings = {f["code"]: f for f in doc["diagnosis"]["findings"]}
    late = findings.get("STRAGGLER", {"level": "info"})  # one late step on a loaded machine: info
    assert "PAUSE" in findings and "HANG" not in findings and late["level"] == "info", list(
        findings
    )  # warnings the tiny loop earns on a loaded machine (latency) may come first
    assert "rank 0 paused 2 times every 4 steps" in findings["PAUSE"]["summary"]
