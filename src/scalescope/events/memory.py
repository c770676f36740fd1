"""Memory that reading a run freed, given back to the system."""

from __future__ import annotations

import contextlib
import ctypes

import pyarrow as pa


def release_memory() -> None:
    """Give back what reading freed: Arrow's pool (mimalloc) and the C heap keep freed memory
    for reuse, and a 1,024-rank run's reading frees as much as its table holds."""
    pa.default_memory_pool().release_unused()
    with contextlib.suppress(OSError, AttributeError):  # not glibc
        ctypes.CDLL("libc.so.6").malloc_trim(0)
