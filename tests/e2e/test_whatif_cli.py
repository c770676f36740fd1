"""`scalescope whatif` on recorded runs (tests/data/runs), the CLI in this process: the table
and its JSON carry the engine's figures, --fix / --comm-speed / --compute-speed choose the
causes, and every bad input is one line with a non-zero exit."""

from __future__ import annotations

import json

import pytest
from recorded_runs import RUNS

from scalescope.analyze.model.whatif import what_if
from scalescope.events import load_run

STRAGGLER = RUNS / "straggler_forward_2" / "run"


def test_the_default_causes_are_printed_and_written_as_the_engine_gives_them(
    cli_in_process, tmp_path
):
    proc = cli_in_process("whatif", STRAGGLER, "--json", tmp_path / "w.json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "w.json").read_text())
    run = load_run(STRAGGLER)
    engine = what_if(run, run.meta.warmup_steps)
    assert doc["schema"] == "scalescope.whatif/1"
    assert [f["cause"] for f in doc["fixes"]] == [f.cause for f in engine.fixes]
    assert [f["gain_ms"] for f in doc["fixes"]] == pytest.approx([f.gain_ms for f in engine.fixes])
    assert doc["replayed"]["step_ms"] == pytest.approx(engine.replayed.step_ms)
    gains = [f["gain_ms"] for f in doc["fixes"]]
    assert gains == sorted(gains, reverse=True), "the largest gain first"
    rank1 = next(f for f in doc["fixes"] if f["cause"] == "rank:1")
    row = next(line for line in proc.stdout.splitlines() if line.startswith("│ rank:1 "))
    assert f"{rank1['prediction']['step_ms']:.2f}" in row and f"{rank1['gain_ms']:+.2f}" in row
    assert "What fixing each cause buys" in proc.stdout
    assert f"Measured step {engine.measured_step_ms:.2f} ms" in proc.stdout


def test_fix_and_speeds_choose_the_causes(cli_in_process, tmp_path):
    proc = cli_in_process(
        "whatif", STRAGGLER, "--fix", "rank:0", "--fix", "rank:1+comm:hidden",
        "--comm-speed", "2", "--compute-speed", "1.5", "--json", tmp_path / "w.json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    fixes = json.loads((tmp_path / "w.json").read_text())["fixes"]
    assert [f["cause"] for f in fixes] == ["rank:0", "rank:1+comm:hidden", "comm:2", "compute:1.5"]
    by = {f["cause"]: f for f in fixes}
    assert by["rank:1+comm:hidden"]["gain_ms"] > by["comm:2"]["gain_ms"] > 0
    assert by["compute:1.5"]["note"] == "compute 1.5x faster"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--fix", "rank:9"], "error: rank 9 is not in the model (ranks 0-1)"),
        (["--fix", "disk:2"], "error: unknown cause 'disk:2'"),
        (["--comm-speed", "0"], "the speed-up must be positive"),
        (
            ["--fix", "comm:hidden@dim:tp"],
            "error: bad cause 'comm:hidden@dim:tp': no replayed "
            "collective has the dim 'tp' (dims: world)",
        ),
    ],
)
def test_a_bad_cause_is_one_line(cli_in_process, args, message):
    proc = cli_in_process("whatif", STRAGGLER, *args)
    assert proc.returncode != 0
    assert message in proc.stderr and proc.stderr.strip().count("\n") == 0, proc.stderr


@pytest.mark.parametrize(
    ("fixes", "message"),
    [
        (["link:nosuch,host"], "error: no rank ran on node 'host' (nodes: host0, host1, host2)"),
        (
            ["link:host0,host1", "link:host2"],
            "error: no group smaller than the world ran over the link 'host2'",
        ),
    ],
)
def test_a_cause_the_model_refuses_on_the_command_line_is_one_line(cli_in_process, fixes, message):
    """The report lists a cause the model refuses beside the fixes it could replay; a user's
    own --fix stays an error, whatever the other causes named."""
    args = [a for fix in fixes for a in ("--fix", fix)]
    proc = cli_in_process("whatif", RUNS / "slowdown_link" / "run", *args)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith(message) and proc.stderr.strip().count("\n") == 0, proc.stderr


def test_a_directory_that_is_not_a_run_is_one_line(cli_in_process, tmp_path):
    proc = cli_in_process("whatif", tmp_path)
    assert proc.returncode != 0 and proc.stderr.startswith("error: ")
    assert proc.stderr.strip().count("\n") == 0, proc.stderr


def test_a_run_with_nothing_to_replay_says_why(cli_in_process):
    proc = cli_in_process("whatif", RUNS / "compute_resnet50" / "run")
    assert proc.returncode != 0
    assert "fewer than two ranks recorded steps" in proc.stderr


def test_an_unknown_option_is_refused(cli_in_process):
    proc = cli_in_process("whatif", STRAGGLER, "--fixx", "rank:1")
    assert proc.returncode == 2 and "--fixx" in proc.stderr


def test_the_timeline_shows_the_replay_as_measured_above_the_fix(cli_in_process, tmp_path):
    from scalescope.analyze.model.replay import replay
    from scalescope.analyze.model.step_grid import build_grid

    proc = cli_in_process("whatif", STRAGGLER, "--fix", "rank:1", "--timeline", tmp_path / "t.json")
    assert proc.returncode == 0, proc.stderr
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert names == {
        1: "as measured (replayed)",
        2: "rank:1 fixed (replayed; began at step 12: as in steps 3-11)",
    }
    steps = [e for e in events if e.get("cat") == "step" and e["tid"] == 0]
    measured = [e["dur"] / 1e3 for e in steps if e["pid"] == 1]
    fixed = [e["dur"] / 1e3 for e in steps if e["pid"] == 2]
    grid, _ = build_grid(load_run(STRAGGLER))
    played = replay(grid).step_ns[-5:, 0] / 1e6  # rank 0's last five steps, ms
    assert measured == pytest.approx(played.tolist())
    assert len(fixed) == 5 and max(fixed) < min(measured) / 3
    ops = [e["name"] for e in events if e.get("cat") == "collective" and e["pid"] == 1]
    assert ops[:4] == ["broadcast", "broadcast", "all_reduce", "all_reduce"]
    assert len(ops) == 5 * 4 * 2  # steps x collectives x ranks
