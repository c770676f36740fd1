"""Images/s of a small-file image folder vs its tar shards, cold and warm page cache.

Writes an ImageFolder of small JPEGs in a temporary directory and packs it with ``scalescope
data pack``'s code. Three tables, each measured folder and shards alternately (the order
flips every round), medians over the rounds and their ratio (shards / folder):

1. storage: the bytes of every image, files read one by one in a shuffled order against
   the shard files read front to back (no tar parsing): what packing changes on disk;
2. reader: every sample through the readers the loaders use (a file read per image, or
   webdataset's tar reader over the shards): the storage plus the reader's own cost;
3. loader: the loader ``scalescope bench --data`` uses (PIL decode, the ImageNet training
   transforms, DataLoader workers): what training sees.

Cold cache: before every pass the page-cache pages of every image file and every shard are
dropped (``posix_fadvise(POSIX_FADV_DONTNEED)`` on our own files: no root, nothing else
touched), so each pass reads from the device, as in a first epoch, a data set bigger than
RAM, or a parallel file system. The kernel's inode and directory caches stay warm (dropping
them needs root and affects the whole machine), so the folder's cold cost here is a lower
bound. Warm cache: every file cached, as when the data set fits in RAM and was read before.

    .venv/bin/python benchmarks/shards_vs_folder.py --images 3000 --workers 0,2 --rounds 6
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from PIL import Image

from results import record
from scalescope.bench.shard_manifest import parse_size, read_manifest
from scalescope.bench.shards import read_shard
from scalescope.data.pack import pack_folder
from scalescope.data.page_cache import data_files, drop_page_cache
from scalescope.data.speed import images_per_s, make_loader, parse_workers

KINDS = ("folder", "shards")
HEADER = f"{'':<24}{'folder img/s':>14}{'shards img/s':>14}{'ratio':>8}  ratio per round"


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=3000, help="images in the folder")
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--pixels", type=int, default=128, help="side of the stored JPEGs")
    p.add_argument("--image-size", type=int, default=96, help="crop of the transforms")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--timed", type=int, default=1024, help="images timed per loader run")
    p.add_argument("--workers", default="0,2")
    p.add_argument("--rounds", type=int, default=6, help="even: each goes first as often")
    p.add_argument("--cache", choices=("cold", "warm", "both"), default="both")
    p.add_argument("--shard-size", default="4MB")
    p.add_argument("--tables", default="storage,reader,loader", help="which tables to run")
    return p.parse_args()


def write_folder(root: Path, images: int, classes: int, pixels: int) -> None:
    """Photo-like JPEGs (smooth gradients plus noise), about 6 kB at 128 px, each synced
    to the disk so that its cached pages are clean (only clean pages can be dropped)."""
    rng = np.random.default_rng(0)
    ramp = np.linspace(0, 1, pixels)[None, :, None]
    for i in range(images):
        folder = root / f"class{i % classes:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        colour = rng.uniform(0, 255, 3)
        pixels_ = colour * ramp + rng.normal(0, 12, (pixels, pixels, 3))
        with open(folder / f"{i:07d}.jpg", "wb") as f:
            Image.fromarray(np.clip(pixels_, 0, 255).astype(np.uint8)).save(f, "JPEG", quality=90)
            f.flush()
            os.fsync(f.fileno())


def fill_cache(files: list[Path]) -> None:
    """Read every file once, so that the pass after it finds all of them cached."""
    for path in files:
        path.read_bytes()


def storage(path: Path) -> float:
    """Images/s of reading the encoded bytes only: each file in a shuffled order, or each
    shard file front to back in 1 MiB reads."""
    start = time.perf_counter()
    if (path / "manifest.json").exists():
        count = read_manifest(path).images
        for shard in sorted(path.glob("*.tar")):
            with open(shard, "rb") as f:
                while f.read(1 << 20):
                    pass
    else:
        files = sorted(path.rglob("*.jpg"))
        random.Random(0).shuffle(files)
        count = sum(1 for f in files if f.read_bytes())
    return count / (time.perf_counter() - start)


def reader(path: Path) -> float:
    """Images/s of every sample through the readers: a file read per image, in a shuffled
    order, or webdataset's tar reader (``read_shard``, what ``bench --data`` streams)."""
    start, count = time.perf_counter(), 0
    if (path / "manifest.json").exists():
        for shard in read_manifest(path).shards:
            count += sum(1 for _ in read_shard(str(path / shard.name), shard.images))
    else:
        files = sorted(path.rglob("*.jpg"))
        random.Random(0).shuffle(files)
        count = sum(1 for f in files if f.read_bytes())
    return count / (time.perf_counter() - start)


def compare(label: str, rounds: int, measure: Callable[[str], float], table: str = "") -> None:
    """One table row: folder and shards measured alternately (the first one flips every
    round), the medians and their ratio, and the ratio of each round's pair."""
    runs: dict[str, list[float]] = {kind: [] for kind in KINDS}
    for r in range(rounds):
        for kind in KINDS[:: 1 if r % 2 == 0 else -1]:
            runs[kind].append(measure(kind))
    f, s = (statistics.median(runs[k]) for k in KINDS)
    pairs = " ".join(f"{b / a:.2f}" for a, b in zip(runs["folder"], runs["shards"], strict=True))
    print(f"{label:<24}{f:>14,.1f}{s:>14,.1f}{s / f:>7.2f}x  {pairs}", flush=True)
    record(
        f"images/s, tar shards / image folder: {table}, {label}", s / f, "ratio", "", None,
        f"medians {s:,.1f} / {f:,.1f} images/s, {rounds} rounds",
    )  # fmt: skip


def run_tables(args: argparse.Namespace, paths: dict[str, Path], every_file: list[Path]) -> None:
    caches = ("cold", "warm") if args.cache == "both" else (args.cache,)
    tables = args.tables.split(",")

    def timed(fn: Callable[[Path], float], cold: bool) -> Callable[[str], float]:
        def run(kind: str) -> float:
            if cold:
                drop_page_cache(every_file)
            else:
                fill_cache(every_file)
            return fn(paths[kind])

        return run

    if "storage" in tables:
        print("\n1. storage: encoded bytes only (files, or shard files end to end)\n" + HEADER)
        for cache in caches:
            compare(f"{cache} cache", args.rounds, timed(storage, cache == "cold"), "storage")
    if "reader" in tables:
        print("\n2. reader: file reads, or webdataset's tar reader (no decode)\n" + HEADER)
        for cache in caches:
            compare(f"{cache} cache", args.rounds, timed(reader, cache == "cold"), "reader")
    if "loader" in tables:
        print(f"\n3. loader: decode + transforms (crop {args.image_size}) + DataLoader, "
              f"batch {args.batch_size}, {args.timed} images per run\n" + HEADER)  # fmt: skip
        for cache in caches:
            for workers in parse_workers(args.workers):

                def loader(path: Path, w: int = workers) -> float:
                    loader = make_loader(str(path), w, args.batch_size, args.image_size, 0)
                    return images_per_s(loader, args.timed)

                label = f"{cache} cache, {workers} workers"
                compare(label, args.rounds, timed(loader, cache == "cold"), "loader")


def main() -> None:
    args = parse()
    with tempfile.TemporaryDirectory(prefix="shards_vs_folder_", dir="/var/tmp") as tmp:
        paths = {"folder": Path(tmp) / "folder", "shards": Path(tmp) / "shards"}
        write_folder(paths["folder"], args.images, args.classes, args.pixels)
        manifest = pack_folder(paths["folder"], paths["shards"], parse_size(args.shard_size))
        every_file = data_files(paths.values())
        jpeg_kb = sum(f.stat().st_size for f in every_file if f.suffix == ".jpg") / 1e3
        print(f"{manifest.images} JPEGs of {args.pixels} px "
              f"(~{jpeg_kb / manifest.images:.1f} kB each), "
              f"{len(manifest.shards)} shards; {args.rounds} interleaved rounds, medians\n"
              "cold cache: every image file and every shard dropped from the page cache "
              "(posix_fadvise DONTNEED) before each pass: first epoch, data set bigger than "
              "RAM, parallel file system; inode and directory caches stay warm\n"
              "warm cache: every image file and shard read once before each pass (the data set "
              "fits in RAM and was read before)")  # fmt: skip
        run_tables(args, paths, every_file)


if __name__ == "__main__":
    main()
