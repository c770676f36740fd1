"""Dropping a data set's files from the page cache, checked with the kernel's own count of
a file's resident pages (mincore(2) on a mapping of it)."""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
import sys
from pathlib import Path

import pytest

from scalescope.data.page_cache import data_files, drop_page_cache

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="posix_fadvise and mincore")


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


def written(path: Path, nbytes: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write(os.urandom(nbytes))
        f.flush()
        os.fsync(f.fileno())  # clean pages: only those can be dropped
    path.read_bytes()
    return path


def test_the_files_of_folders_and_files_are_dropped_and_nothing_else(tmp_path):
    if file_system(tmp_path) in ("tmpfs", "ramfs"):
        pytest.skip("files in RAM (tmpfs) have no disk copy to drop their pages for")
    shard = written(tmp_path / "shards" / "shard-000000.tar", 64 * 1024)
    images = [written(tmp_path / "img" / c / f"{i}.jpg", 9000) for c in "ab" for i in range(3)]
    other = written(tmp_path / "other.bin", 32 * 1024)
    assert resident_pages(shard) == 16 and resident_pages(other) == 8
    files = data_files([tmp_path / "img", shard])
    assert sorted(files) == sorted([*images, shard])
    assert drop_page_cache(files) == 7
    assert [resident_pages(f) for f in files] == [0] * 7
    assert resident_pages(other) == 8
