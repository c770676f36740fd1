"""Polling a condition in tests that watch another thread or process."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_for(found: Callable[[], Any], what: str, seconds: float = 10.0) -> Any:
    """``found()``'s first value that is neither None nor False, asked every 0.05 s;
    AssertionError naming ``what`` after ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if (value := found()) is not None and value is not False:
            return value
        time.sleep(0.05)
    raise AssertionError(f"no {what} within {seconds} s")
