"""A rank records its end whatever signals follow the first: the launcher's SIGTERM lands
while the rank still unwinds from the user's Ctrl-C, or from its own error."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from scalescope.events.run import read_rank_meta

SLOW_CLEANUP = """
import sys, time
from pathlib import Path
Path(sys.argv[1]).touch()
try:
    if sys.argv[2] == "raise":
        time.sleep(0.5)
        raise RuntimeError("deliberate")
    while True:
        time.sleep(0.05)
finally:
    time.sleep(2.0)  # a DataLoader's workers joining, a checkpoint closing
"""


def start_rank(tmp_path: Path, how: str) -> subprocess.Popen[bytes]:
    script = tmp_path / "slow_cleanup.py"
    script.write_text(textwrap.dedent(SLOW_CLEANUP))
    ready = tmp_path / "ready"
    argv = [sys.executable, "-m", "scalescope.probe.bootstrap", "--run-dir", str(tmp_path)]
    proc = subprocess.Popen(
        [*argv, "--no-probe", str(script), str(ready), how],
        env=os.environ | {"RANK": "0", "WORLD_SIZE": "1"},
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        assert time.monotonic() < deadline, "the rank did not start in 60 s"
        time.sleep(0.05)
    return proc


@pytest.mark.parametrize("second", [signal.SIGTERM, signal.SIGINT])
def test_a_second_signal_during_the_cleanup_does_not_lose_the_end(tmp_path, second):
    proc = start_rank(tmp_path, "loop")
    proc.send_signal(signal.SIGINT)
    time.sleep(0.5)
    proc.send_signal(second)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGINT, err.decode()
    meta = read_rank_meta(tmp_path, 0)
    assert meta is not None
    assert (meta.status, meta.exit_code, meta.error) == ("interrupted", 130, "stopped by SIGINT")


def test_a_sigterm_while_an_error_unwinds_names_both(tmp_path):
    """The launcher stops the job's ranks when one fails: a rank still in the user's cleanup
    from its own error is stopped, and says what it was ending with."""
    proc = start_rank(tmp_path, "raise")
    time.sleep(1.0)  # raised at 0.5 s, now in the 2 s cleanup
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err.decode()
    meta = read_rank_meta(tmp_path, 0)
    assert meta is not None
    assert (meta.status, meta.exit_code) == ("interrupted", 143)
    assert meta.error == "stopped by SIGTERM (during RuntimeError: deliberate)"
