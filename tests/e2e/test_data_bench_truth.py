"""``data bench``'s numbers against what happened: each run's images/s against the times at
which its DataLoader delivered its batches, and, with ``--cold``, the kernel's own count of
the data's pages in the page cache (mincore(2)) as each run starts.

The runs are ``measure``'s (what ``scalescope data bench`` calls) on a real image folder,
written moments before as a user's would be (not yet on disk), and its shards; the loaders
are the real ones, wrapped only to note when each batch arrived and what was cached.
"""

from __future__ import annotations

import sys
import time

import pytest
from image_folders import make_image_folder
from page_residency import file_system, resident_pages

from scalescope.data import speed as data_speed
from scalescope.data.pack import pack_folder
from scalescope.data.page_cache import data_files

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="posix_fadvise and mincore")
IMAGES, BATCH = 32, 8
RATE_REL = 0.15
"""The rate over 4 batches against the arrivals' clock: a descheduling between a batch's
arrival and the bench's clock (a few ms on a loaded machine, CI 2026-11-29: 907 against 813
images/s) moves it ~10 %; a batch too many or too few counted moves it 25 % and more."""


class Clocked:
    """A loader whose batches are timed as they arrive."""

    def __init__(self, loader, arrivals: list[tuple[float, int]]) -> None:
        self.loader, self.arrivals = loader, arrivals

    def __getattr__(self, name: str):
        return getattr(self.loader, name)

    def __iter__(self):
        for images, labels in self.loader:
            self.arrivals.append((time.perf_counter(), len(images)))
            yield images, labels


@pytest.fixture(scope="module")
def cold_runs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("data")
    if file_system(tmp) in ("tmpfs", "ramfs"):
        pytest.skip("files in RAM (tmpfs) cannot leave the page cache")
    folder = make_image_folder(tmp / "img", classes=3, per_class=16, size=40)
    shards = tmp / "shards"
    pack_folder(folder, shards, shard_bytes=12_000)
    files = {str(p): data_files([p]) for p in (folder, shards)}
    every = [f for fs in files.values() for f in fs]
    runs: list[dict] = []
    real = data_speed.make_loader

    def make_loader(path: str, workers: int, *args):
        cached = sum(resident_pages(f) for f in every)
        runs.append({"path": path, "workers": workers, "cached_at_start": cached, "arrivals": []})
        return Clocked(real(path, workers, *args), runs[-1]["arrivals"])

    def after_run() -> None:
        runs[-1]["cached_after"] = sum(resident_pages(f) for f in files[runs[-1]["path"]])

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(data_speed, "make_loader", make_loader)
        speeds = data_speed.measure(
            [str(folder), str(shards)], [0, 1], images=IMAGES, batch_size=BATCH,
            image_size=32, rounds=2, cold=True, on_run=after_run,
        )  # fmt: skip
    return {"speeds": speeds, "runs": runs}


def test_every_cold_run_starts_with_the_data_out_of_the_page_cache(cold_runs: dict) -> None:
    runs = cold_runs["runs"]
    assert len(runs) == 2 * 2 * 2
    assert [r["cached_at_start"] for r in runs] == [0] * len(runs)
    # Reading put the pages there: a run that found them cached would have been counted.
    assert all(r["cached_after"] > 0 for r in runs)


def test_images_per_s_is_the_rate_the_batches_arrived_at(cold_runs: dict) -> None:
    speeds = {(s.path, s.workers): list(s.images_per_s) for s in cold_runs["speeds"]}
    for run in cold_runs["runs"]:
        (first, _), *rest = run["arrivals"]
        images = sum(n for _, n in rest)
        assert images >= IMAGES
        own_clock = images / (rest[-1][0] - first)
        reported = speeds[run["path"], run["workers"]].pop(0)
        assert reported == pytest.approx(own_clock, rel=RATE_REL), run["path"]
