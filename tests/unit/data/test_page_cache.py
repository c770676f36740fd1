"""Dropping a data set's files from the page cache, checked with the kernel's own count of
a file's resident pages (mincore(2) on a mapping of it)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from page_residency import file_system, resident_pages

from scalescope.data.page_cache import data_files, drop_page_cache

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="posix_fadvise and mincore")


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


def test_a_file_written_moments_ago_is_dropped_too(tmp_path):
    """Its pages are dirty (not yet on disk), which fadvise alone leaves cached."""
    if file_system(tmp_path) in ("tmpfs", "ramfs"):
        pytest.skip("files in RAM (tmpfs) have no disk copy to drop their pages for")
    fresh = tmp_path / "fresh.jpg"
    fresh.write_bytes(os.urandom(64 * 1024))
    assert resident_pages(fresh) == 16
    assert drop_page_cache([fresh]) == 1
    assert resident_pages(fresh) == 0
