"""Progress of a command made of several runs (scale sizes, suite workloads), one line each.

A line, not a redrawn bar: the runs' own ranks write to the same terminal, and a bar redrawn
under them would be torn. Each line carries a bar, what is done, the time spent and an
estimate of the time left (the mean time of the runs done so far, times the runs left).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from scalescope.events.units import fmt_clock

BAR = 20


@dataclass
class Eta:
    """``total`` runs; ``line(what)`` before each starts."""

    total: int
    label: str
    started: float = field(default_factory=time.monotonic)
    done: int = 0

    def line(self, what: str, now: float | None = None) -> str:
        """The progress line for the next run, ``what``; counts the previous one as done."""
        now = time.monotonic() if now is None else now
        elapsed = now - self.started
        filled = round(BAR * self.done / self.total) if self.total else BAR
        bar = "█" * filled + "░" * (BAR - filled)
        left = "?"
        if self.done:
            left = "~" + fmt_clock(elapsed / self.done * (self.total - self.done))
        text = (f"{self.label} [{self.done + 1}/{self.total}] {bar} {fmt_clock(elapsed)} "
                f"elapsed, {left} left: {what}")  # fmt: skip
        self.done += 1
        return text
