"""Drop a data set's files from the page cache, to time a read that goes to the storage.

``posix_fadvise(POSIX_FADV_DONTNEED)`` on each file asks the kernel to drop that file's
cached pages: no root, and only our own files are touched (``echo 3 > drop_caches`` needs
root and empties the cache of every job on the node). Only clean pages go, so each file is
written back first (``fdatasync``): a folder written moments ago would otherwise stay cached
on the first cold pass. The kernel's inode and directory caches stay, so opening a small file
still costs less than on a cold node.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path


def data_files(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Every regular file under each path (a path may be a file itself)."""
    out: list[Path] = []
    for path in map(Path, paths):
        if path.is_file():
            out.append(path)
            continue
        for root, _, names in os.walk(path, followlinks=True):
            out.extend(Path(root, name) for name in names)
    return [f for f in out if f.is_file()]


def drop_page_cache(files: Iterable[Path]) -> int:
    """Write back, then ask the kernel to drop, the cached pages of each file; the number of
    files asked."""
    count = 0
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        count += 1
    return count
