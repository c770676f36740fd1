"""How much of a file is in the page cache, as the kernel counts it: mincore(2) on a mapping
of the file, which reads no page (the mapping is never touched)."""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
from pathlib import Path


def resident_pages(path: Path) -> int:
    """Pages of ``path`` in the page cache, as mincore(2) reports them (no page is read:
    the mapping is never touched)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    size = path.stat().st_size
    vector = (ctypes.c_ubyte * -(-size // mmap.PAGESIZE))()
    with open(path, "rb") as f, mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY) as mapped:
        start = ctypes.c_char.from_buffer(mapped)
        status = libc.mincore(ctypes.addressof(start), size, vector)
        del start  # the mapping closes only once no buffer points into it
    if status != 0:
        raise OSError(ctypes.get_errno(), "mincore failed")
    return sum(v & 1 for v in vector)


def file_system(path: Path) -> str:
    """The type of the file system holding ``path`` (longest mount point in /proc/mounts)."""
    mounts = [line.split()[1:3] for line in Path("/proc/mounts").read_text().splitlines()]
    where = str(path.resolve())
    found = [
        (len(m), kind) for m, kind in mounts if where == m or where.startswith(m.rstrip("/") + "/")
    ]
    return max(found)[1] if found else "unknown"
