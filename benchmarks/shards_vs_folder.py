"""Images/s of a small-file image folder vs its tar shards, through the bench's loader.

Writes an ImageFolder of small JPEGs in a temporary directory, packs it with
``scalescope data pack``'s code, then reads both through the loader ``scalescope bench
--data`` uses (PIL decode + the ImageNet training transforms, DataLoader workers),
interleaving folder and shards runs and reporting medians and the shards/folder ratio.

A second table times the reading alone (every file's bytes in a shuffled order, against
every shard's samples through the same webdataset tar reader), the part packing changes;
the first includes the decode and transforms, which packing does not change.

``--cache cold`` evicts the data set's files from the page cache before every run
(posix_fadvise DONTNEED on our own files; nothing else is touched), as on a parallel file
system where the images are not cached on the compute node; ``warm`` reads them cached.

    .venv/bin/python benchmarks/shards_vs_folder.py --images 3000 --workers 0,2 --rounds 5
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

from scalescope.bench.data_speed import images_per_s, make_loader, parse_workers
from scalescope.bench.pack import pack_folder
from scalescope.bench.shards import parse_size, read_manifest, read_shard


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=3000, help="images in the folder")
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--pixels", type=int, default=128, help="side of the stored JPEGs")
    p.add_argument("--image-size", type=int, default=96, help="crop of the transforms")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--timed", type=int, default=1024, help="images timed per run")
    p.add_argument("--workers", default="0,2")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--cache", choices=("cold", "warm", "both"), default="both")
    p.add_argument("--shard-size", default="4MB")
    return p.parse_args()


def write_folder(root: Path, images: int, classes: int, pixels: int) -> None:
    """Photo-like JPEGs (smooth gradients plus noise), about 10 kB at 128 px."""
    rng = np.random.default_rng(0)
    ramp = np.linspace(0, 1, pixels)[None, :, None]
    for i in range(images):
        folder = root / f"class{i % classes:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        colour = rng.uniform(0, 255, 3)
        pixels_ = colour * ramp + rng.normal(0, 12, (pixels, pixels, 3))
        Image.fromarray(np.clip(pixels_, 0, 255).astype(np.uint8)).save(
            folder / f"{i:07d}.jpg", quality=90
        )


def evict(root: Path) -> None:
    """Drop the page-cache pages of every file under ``root`` (clean pages only)."""
    for path in root.rglob("*"):
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fdatasync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def run_once(path: Path, workers: int, cold: bool, args: argparse.Namespace) -> float:
    if cold:
        evict(path)
    loader = make_loader(str(path), workers, args.batch_size, args.image_size, seed=0)
    return images_per_s(loader, args.timed)


def read_only(path: Path, cold: bool) -> float:
    """Images/s of reading the encoded images only: files in a shuffled order, or shards."""
    if cold:
        evict(path)
    start, count = time.perf_counter(), 0
    if (path / "manifest.json").exists():
        for shard in read_manifest(path).shards:
            count += sum(1 for _ in read_shard(str(path / shard.name), shard.images))
    else:
        files = sorted(path.rglob("*.jpg"))
        random.Random(0).shuffle(files)
        count = sum(1 for f in files if f.read_bytes())
    return count / (time.perf_counter() - start)


def compare(label: str, rounds: int, measure) -> None:
    """One table row: folder and shards measured alternately, medians and their ratio."""
    runs: dict[str, list[float]] = {"folder": [], "shards": []}
    for _ in range(rounds):
        for kind in runs:
            runs[kind].append(measure(kind))
    f, s = (statistics.median(runs[k]) for k in runs)
    print(f"{label:<22}{f:>14.1f}{s:>14.1f}{s / f:>7.2f}x")


def main() -> None:
    args = parse()
    caches = ("cold", "warm") if args.cache == "both" else (args.cache,)
    with tempfile.TemporaryDirectory(prefix="shards_vs_folder_", dir="/var/tmp") as tmp:
        folder, shards = Path(tmp) / "folder", Path(tmp) / "shards"
        write_folder(folder, args.images, args.classes, args.pixels)
        manifest = pack_folder(folder, shards, parse_size(args.shard_size))
        mean_kb = manifest.nbytes / manifest.images / 1e3
        print(f"{manifest.images} JPEGs of {args.pixels} px (~{mean_kb:.1f} kB each), "
              f"{len(manifest.shards)} shards; crop {args.image_size}, batch {args.batch_size}, "
              f"{args.timed} images timed per run, {args.rounds} interleaved rounds")  # fmt: skip
        header = f"{'':<22}{'folder img/s':>14}{'shards img/s':>14}{'ratio':>8}"
        paths = {"folder": folder, "shards": shards}
        print("decode + transforms + DataLoader\n" + header)
        for cache in caches:
            for workers in parse_workers(args.workers):

                def decoded(kind: str, w: int = workers, cold: bool = cache == "cold") -> float:
                    return run_once(paths[kind], w, cold, args)

                compare(f"{cache} cache, {workers} workers", args.rounds, decoded)
        print("reading only (no decode)\n" + header)
        for cache in caches:
            compare(f"{cache} cache", args.rounds,
                    lambda k, c=cache: read_only(paths[k], c == "cold"))  # fmt: skip


if __name__ == "__main__":
    main()
