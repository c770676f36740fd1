"""Which steps' rows the probe writes in full at ``--record summary`` (docs/probe.md).

Every step is summarised (probe/summary.py); the rows of a window step are written in full
as well: the first steps (the warm-up and the first measured ones) and a window of
``width`` steps every ``every`` steps, so the what-if has whole steps to replay across a
long run and every window gives an exact check of its summaries.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

FULL, SUMMARY = "full", "summary"
LEVELS = (FULL, SUMMARY)
DEFAULT_LEVEL = SUMMARY
"""What ``scalescope run`` (and the Python API, bench, scale, tune, suite) records without
``--record``: every step summarised, full rows in the windows; ``--record full`` keeps a row
per call."""
WINDOWS_VARIABLE = "SCALESCOPE_RECORD_WINDOWS"
"""``FIRST:EVERY:WIDTH`` (steps) in a rank's environment: the windows other than the default."""


@dataclass(frozen=True)
class Windows:
    """Steps ``[0, first)`` and ``[k * every, k * every + width)`` are written in full."""

    first: int = 10
    """The warm-up (1-2 steps) and the first 8 measured steps."""
    every: int = 100
    width: int = 4

    def __post_init__(self) -> None:
        if self.first < 0 or self.every < 1 or not 0 <= self.width <= self.every:
            raise ValueError(
                f"record windows need first >= 0, every >= 1, 0 <= width <= every; got "
                f"{self.first}:{self.every}:{self.width}"
            )

    def full(self, step: int) -> bool:
        return step < self.first or step % self.every < self.width


def parse_windows(text: str) -> Windows:
    """``FIRST:EVERY:WIDTH`` read, e.g. ``10:100:4``; a bad one is one line's error."""
    parts = text.split(":")
    try:
        first, every, width = (int(p) for p in parts)
    except ValueError:
        raise ValueError(
            f"{WINDOWS_VARIABLE} takes FIRST:EVERY:WIDTH (steps), got {text!r}"
        ) from None
    return Windows(first, every, width)


FIRST_MEASURED = 8
"""Measured steps the first window holds past the warm-up (at least 10 steps in all)."""


def windows_from_env(warmup_steps: int = 1) -> Windows:
    """The windows ``WINDOWS_VARIABLE`` gives, else the default ones with the first window
    past a long warm-up (``--warmup-steps``)."""
    text = os.environ.get(WINDOWS_VARIABLE, "")
    if text:
        return parse_windows(text)
    return Windows(first=max(Windows.first, warmup_steps + FIRST_MEASURED))
