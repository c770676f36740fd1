"""Ending ranks that do not end by themselves: SIGTERM, a grace, then SIGKILL."""

from __future__ import annotations

import os
import signal
from contextlib import suppress

import psutil

KILL_GRACE_S = 5.0


def stop_processes(procs: list[psutil.Process]) -> None:
    """SIGTERM the ranks, then SIGKILL what is left of them and their children."""
    family = list(procs)
    for proc in procs:
        with suppress(psutil.Error):
            family += proc.children(recursive=True)
        with suppress(psutil.Error):
            proc.send_signal(signal.SIGTERM)
    _, alive = psutil.wait_procs(family, timeout=KILL_GRACE_S)
    for proc in alive:
        with suppress(psutil.Error):
            os.kill(proc.pid, signal.SIGKILL)


def kill_family(pid: int) -> None:
    """SIGKILL a process and its children (DataLoader workers): it had its SIGTERM."""
    with suppress(psutil.Error):
        proc = psutil.Process(pid)
        for member in [*proc.children(recursive=True), proc]:
            with suppress(psutil.Error):
                member.kill()
