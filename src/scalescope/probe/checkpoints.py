"""``torch.save`` as the step phase ``checkpoint``, with the bytes each save wrote: the size
of the file at a path, or how far a file object moved (probe/phases.py installs it)."""

from __future__ import annotations

import functools
import os
from typing import Any

from scalescope.events.schema import CHECKPOINT
from scalescope.probe.recorder import Recorder


def patched_save(original: Any, recorder: Recorder) -> Any:
    """``torch.save`` wrapped: each call is the phase ``checkpoint``, with the bytes it wrote."""

    @functools.wraps(original)
    def save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> Any:
        start = recorder.now()
        at = _position(f)
        recorder.enter_phase(CHECKPOINT, start)
        try:
            return original(obj, f, *args, **kwargs)
        finally:
            row = recorder.phase(CHECKPOINT, start, recorder.now())
            row[5] = _written(f, at)

    return save


def _position(f: Any) -> int | None:
    """Where a file object stands before a save (None for a path)."""
    tell = getattr(f, "tell", None)
    try:
        return int(tell()) if callable(tell) else None
    except (OSError, ValueError):
        return None


def _written(f: Any, at: int | None) -> int:
    """Bytes a save wrote: the file's size for a path, how far a file object moved."""
    try:
        if at is not None:
            return max(int(f.tell()) - at, 0)
        return os.path.getsize(f) if isinstance(f, (str, os.PathLike)) else 0
    except (OSError, ValueError, TypeError):
        return 0
