"""Images/s of an image folder and of its shards through the bench's own loader
(``scalescope data bench``): the same decode, training transforms and DataLoader.

Runs are interleaved (every path and worker count once per round, rounds repeated) so that
a machine whose speed drifts affects all of them alike; the median over rounds is reported.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from torch.utils.data import DataLoader

from scalescope.bench.data import build_loader, image_folder, train_transforms
from scalescope.bench.data_check import validate_data
from scalescope.bench.shard_manifest import is_shard_dir
from scalescope.bench.shards import shard_loader
from scalescope.data.page_cache import data_files, drop_page_cache


@dataclass(frozen=True)
class Speed:
    """One data set read with one worker count, once per round."""

    path: str
    kind: str
    """folder or shards."""
    workers: int
    images_per_s: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.images_per_s)


@dataclass(frozen=True)
class Ratio:
    """Shards over folder at one worker count, from the medians."""

    workers: int
    folder_images_per_s: float
    shards_images_per_s: float

    @property
    def ratio(self) -> float:
        return self.shards_images_per_s / self.folder_images_per_s


def data_kind(path: str | os.PathLike[str]) -> str:
    validate_data(path)
    return "shards" if is_shard_dir(path) else "folder"


def make_loader(path: str, workers: int, batch_size: int, image_size: int, seed: int):
    """The loader ``bench --data path`` uses in a one-rank run."""
    transform = train_transforms(image_size)
    if is_shard_dir(path):
        return shard_loader(path, batch_size=batch_size, workers=workers, pin_memory=False,
                            seed=seed, rank=0, world_size=1, transform=transform)  # fmt: skip
    dataset = image_folder(path, image_size)
    return build_loader(dataset, batch_size, workers, False, seed, 0, 1)


def images_per_s(loader: DataLoader, images: int) -> float:
    """Images/s over at least ``images`` images after the first batch, which is left out
    (it carries the workers' start-up)."""
    batches = _batches(loader)
    next(batches)
    seen, start = 0, time.perf_counter()
    while seen < images:
        seen += next(batches)
    return seen / (time.perf_counter() - start)


def _batches(loader: DataLoader):
    epoch = 0
    while True:
        if hasattr(loader.sampler, "set_epoch"):
            loader.sampler.set_epoch(epoch)
        for images, _ in loader:
            yield len(images)
        epoch += 1


def measure(
    paths: Sequence[str | os.PathLike[str]],
    workers: Sequence[int],
    *,
    images: int = 512,
    batch_size: int = 32,
    image_size: int = 224,
    rounds: int = 3,
    seed: int = 0,
    cold: bool = False,
    on_run: Callable[[], None] | None = None,
) -> list[Speed]:
    """Every path with every worker count, interleaved over ``rounds``; with ``cold``, every
    file of every path is dropped from the page cache before each run (docs/data.md)."""
    if not paths or not workers or rounds < 1 or images < 1 or batch_size < 1:
        raise ValueError("give at least one path, one worker count, one round and one image")
    kinds = {str(p): data_kind(p) for p in paths}
    if cold and not hasattr(os, "posix_fadvise"):
        raise ValueError("--cold needs posix_fadvise, which this system lacks (Linux has it)")
    files = data_files(paths) if cold else []
    runs: dict[tuple[str, int], list[float]] = {(str(p), w): [] for w in workers for p in paths}
    for _ in range(rounds):
        for path, w in runs:
            drop_page_cache(files)
            loader = make_loader(path, w, batch_size, image_size, seed)
            runs[path, w].append(images_per_s(loader, images))
            del loader
            if on_run:
                on_run()
    return [Speed(p, kinds[p], w, tuple(v)) for (p, w), v in runs.items()]


def ratios(speeds: Sequence[Speed]) -> list[Ratio]:
    """Per worker count, the first shard directory against the first folder measured."""
    out = []
    for w in sorted({s.workers for s in speeds}):
        folder = next((s for s in speeds if s.workers == w and s.kind == "folder"), None)
        shards = next((s for s in speeds if s.workers == w and s.kind == "shards"), None)
        if folder and shards:
            out.append(Ratio(w, folder.median, shards.median))
    return out


def parse_workers(text: str) -> list[int]:
    """``"0,2,4"`` -> [0, 2, 4]; ValueError for anything but non-negative integers."""
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        values = [-1]
    if any(v < 0 for v in values):
        raise ValueError(f"--workers takes worker counts like 0,2,4, got {text!r}")
    return list(dict.fromkeys(values))


def one_line(exc: BaseException) -> str:
    """The message of an error, also when a DataLoader worker re-raised it with a traceback
    (whose last line is ``module.Class: message``)."""
    lines = [line for line in str(exc).splitlines() if line.strip()]
    if len(lines) > 1 and ": " in lines[-1]:
        return lines[-1].split(": ", 1)[1]
    return lines[0] if lines else type(exc).__name__
