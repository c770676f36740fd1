"""Memory peak per step: CUDA max allocated when CUDA is in use, else the RSS high-water mark."""

from __future__ import annotations

from pathlib import Path

import torch

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


class MemoryPeak:
    """Reads the peak since the last call and resets it.

    On Linux, writing ``5`` to ``/proc/self/clear_refs`` resets VmHWM, so each step gets
    its own peak; where that is refused the lifetime peak is reported (still an upper bound).
    """

    def __init__(self) -> None:
        self._can_reset = True
        self._has_status = _STATUS.exists()

    def read_and_reset(self) -> tuple[str, int] | None:
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            peak = torch.cuda.max_memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            return "cuda_max_allocated", int(peak)
        if not self._has_status:
            return None
        peak = _read_hwm_bytes()
        if self._can_reset:
            try:
                _CLEAR_REFS.write_text("5")
            except OSError:
                self._can_reset = False
        return ("rss_peak", peak) if peak is not None else None


def _read_hwm_bytes() -> int | None:
    try:
        with _STATUS.open() as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None
