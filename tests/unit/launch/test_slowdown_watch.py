"""launch/watch/slowdown.py: an alert goes to alerts.jsonl, the launcher's log and the
``--on-slowdown`` hook; the options refuse bad values in one line."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import pytest

from scalescope.analyze.watch.slowdown_alerts import Alert, latest_alert, read_alerts
from scalescope.launch.options.groups import HangOptions, LaunchConfig, Recording
from scalescope.launch.watch.slowdown import SlowdownWatch

ONSET = Alert(
    event="onset", id=1, subject="rank", ranks=(3,), nodes=("c3",), phase="forward",
    category="compute", change_pct=38.0, phase_change_pct=90.0, baseline_ms=100.0,
    now_ms=138.0, since_step=5012, detected_step=5020, detected_at=1.0e9,
    message="slowdown: rank 3 on node c3: forward +90 % since step 5,012; ...",
)  # fmt: skip


def test_an_alert_goes_to_the_file_the_log_and_the_hook(tmp_path: Path, capsys) -> None:
    hook = f"{sys.executable} -c \"import os; print(os.environ['SCALESCOPE_ALERT'])\" > hook.txt"
    watch = SlowdownWatch(tmp_path, lambda rank: "", on_slowdown=f"cd {tmp_path} && {hook}")
    watch.raise_alert(ONSET)
    assert read_alerts(tmp_path) == [ONSET]
    assert f"scalescope: {ONSET.message}" in capsys.readouterr().err
    deadline = time.monotonic() + 20
    while not (tmp_path / "hook.txt").exists() or not (tmp_path / "hook.txt").read_text():
        assert time.monotonic() < deadline, "the hook never ran"
        time.sleep(0.05)
    assert json.loads((tmp_path / "hook.txt").read_text()) == json.loads(json.dumps(asdict(ONSET)))


def test_a_failing_hook_leaves_the_alert_recorded(tmp_path: Path) -> None:
    watch = SlowdownWatch(tmp_path, lambda rank: "", on_slowdown="exit 3")
    watch.raise_alert(ONSET)
    assert read_alerts(tmp_path) == [ONSET]


def test_a_torn_last_line_is_left_out_and_the_open_alert_is_latest(tmp_path: Path) -> None:
    SlowdownWatch(tmp_path, lambda rank: "").raise_alert(ONSET)
    with open(tmp_path / "alerts.jsonl", "a") as f:
        f.write('{"event": "recov')
    alerts = read_alerts(tmp_path)
    assert alerts == [ONSET] and latest_alert(alerts) == ONSET
    assert read_alerts(tmp_path / "nowhere") == [] and latest_alert([]) is None


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"slowdown_pct": -1.0}, "--slowdown-threshold must be 0 (off) to 1000 %, got -1.0"),
        ({"on_slowdown": "  "}, "--on-slowdown needs a command"),
    ],
)
def test_bad_slowdown_options_are_one_line(kwargs, words) -> None:
    with pytest.raises(ValueError, match="^" + words.replace("(", r"\(").replace(")", r"\)")):
        HangOptions(**kwargs)


def test_the_hook_needs_the_probe() -> None:
    with pytest.raises(ValueError, match="--on-slowdown needs the probe"):
        LaunchConfig(recording=Recording(no_probe=True), hang=HangOptions(on_slowdown="true"))


def test_the_cli_refuses_a_bad_threshold_before_any_rank_starts(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("raise SystemExit('must not start')\n")
    proc = subprocess.run(
        [sys.executable, "-m", "scalescope.cli", "run", "-n", "2", "--slowdown-threshold", "-5",
         str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "must not start" not in proc.stderr
    assert "--slowdown-threshold" in proc.stderr.strip().splitlines()[-1]
