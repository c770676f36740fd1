"""A live view redrawn on the terminal: in the foreground until q or Ctrl-C (``watch``), or
by a background thread while the main thread launches (``LiveThread``, ``run --live``: torch's
launcher owns the main thread)."""

from __future__ import annotations

import select
import sys
import termios
import threading
import time
import tty
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live

from scalescope.live.run_view import LiveTop

REFRESH_S = 1.0


@contextmanager
def keys() -> Iterator[bool]:
    """stdin in cbreak mode (keys one at a time, Ctrl-C still a signal) when a terminal."""
    if not sys.stdin.isatty():
        yield False
        return
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    tty.setcbreak(fd)
    try:
        yield True
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def quit_pressed(timeout_s: float) -> bool:
    ready, _, _ = select.select([sys.stdin], [], [], timeout_s)
    return bool(ready) and sys.stdin.read(1) in ("q", "Q")


def watch(top: Any, console: Console) -> int:
    """Redraw until q (exit 0) or Ctrl-C (130); without a terminal, until the run ends.
    ``top``: anything with ``frame()`` and ``ended`` (LiveTop, StoreTop)."""
    first = top.frame()
    try:
        with keys() as interactive, Live(first, console=console, auto_refresh=False) as live:
            while True:
                if interactive:
                    if quit_pressed(REFRESH_S):
                        return 0
                elif top.ended:
                    return 0
                else:
                    time.sleep(REFRESH_S)
                live.update(top.frame(), refresh=True)
    except KeyboardInterrupt:
        return 130


class LiveThread:
    """The live view drawn by a background thread while the main thread launches."""

    def __init__(self, run_dir: Path, console: Console) -> None:
        self.top = LiveTop(run_dir, show_output=True)
        self.live = Live(console=console, auto_refresh=False, redirect_stdout=False)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="scalescope-live", daemon=True)

    def _draw(self) -> None:
        try:
            self.live.update(self.top.frame(), refresh=True)
        except (OSError, ValueError) as exc:  # run.json not written yet
            self.live.update(f"waiting for the run to start ({exc})", refresh=True)

    def _loop(self) -> None:
        while not self.stop.wait(REFRESH_S):
            self._draw()

    def __enter__(self) -> LiveThread:
        self.live.start()
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        self._draw()
        self.live.stop()
