"""Tar shards of an image folder: a streaming reader (the manifest and its checks, which
need no torch: ``bench.shard_manifest``).

A shard directory, as ``scalescope data pack`` writes it, holds ``shard-NNNNNN.tar`` files
in WebDataset layout (``NNNNNN.jpg`` + ``NNNNNN.cls`` per image, the class index as text)
and a ``manifest.json`` written last: a directory without the manifest is not a complete
pack. Files are read with webdataset's tar iterators, so any WebDataset loader reads them too.
"""

from __future__ import annotations

import io
import itertools
import os
import random
from collections.abc import Callable, Iterator
from typing import Any

import torch
from PIL import Image
from torch.utils.data import DataLoader, IterableDataset, get_worker_info
from webdataset.tariterators import tarfile_samples

from scalescope.bench.shard_manifest import Manifest, ShardError, validate_shard_dir

SHUFFLE_BUFFER = 256
"""Encoded samples mixed in memory by each reader, on top of the per-epoch shard order;
decoding comes after, so only the samples handed out are decoded."""


def decode_image(data: bytes) -> Image.Image:
    """An RGB image from encoded bytes, as torchvision's ImageFolder loads a file."""
    with Image.open(io.BytesIO(data)) as image:
        return image.convert("RGB")


def read_shard(path: str, expected: int | None = None) -> Iterator[tuple[str, bytes, int]]:
    """(shard and key, encoded image, label) of every sample of one shard, in stored order.

    A failure to read, or fewer samples than ``expected`` (tarfile ends quietly at a damaged
    header past the first), becomes a ShardError naming the shard and the sample.
    """
    key, count = "(first)", 0
    try:
        for sample in tarfile_samples([{"url": path}]):
            key = sample["__key__"]
            image = next(v for k, v in sample.items() if not k.startswith("__") and k != "cls")
            yield f"{path}, sample {key}", image, int(sample["cls"])
            count += 1
    except (StopIteration, KeyError) as exc:
        raise ShardError(f"shard {path}: sample {key} lacks an image or .cls ({exc})") from None
    except Exception as exc:  # tarfile and webdataset raise many kinds
        reason = str(exc).split(" @ ")[0] or type(exc).__name__
        raise ShardError(f"shard {path} is damaged at sample {key}: {reason}") from None
    if expected is not None and count != expected:
        raise ShardError(
            f"shard {path} is damaged after sample {key}: {count} of the {expected} samples "
            "its manifest lists could be read"
        )


def load_sample(
    where: str, data: bytes, label: int, transform: Callable[[Image.Image], Any]
) -> tuple[Any, int]:
    """The transformed image and label; ShardError naming the sample if it does not decode."""
    try:
        image = decode_image(data)
    except Exception as exc:  # PIL raises many kinds
        raise ShardError(f"shard {where}: the image does not decode ({exc})") from None
    return transform(image), label


def stream_shards(num_shards: int, streams: int, stream: int, seed: int) -> list[int]:
    """The shards stream ``stream`` of ``streams`` reads: its own slice of a seeded
    permutation (disjoint from the other streams'), or one shard shared with others when
    there are fewer shards than streams."""
    order = list(range(num_shards))
    random.Random(seed).shuffle(order)
    return order[stream::streams] or [order[stream % num_shards]]


class ShardImages(IterableDataset):
    """One rank's endless stream of (image, label) cut into epochs of ``images_per_epoch``.

    The ranks and loader workers (the streams) each read their own shards over and over
    (as webdataset's ``split_by_node``/``split_by_worker`` do), in a new order at every
    pass, so every rank gets the same number of full batches (what DDP needs) and an epoch
    is a count of images, not a pass over particular files. Each
    worker yields whole batches only: ``images_per_epoch`` must be a multiple of
    ``batch_size``.
    """

    def __init__(self, root: str | os.PathLike[str], manifest: Manifest, *, rank: int,
                 world_size: int, images_per_epoch: int, batch_size: int,
                 transform: Callable[[Image.Image], Any], seed: int = 0) -> None:  # fmt: skip
        super().__init__()
        self.paths = [os.path.join(root, s.name) for s in manifest.shards]
        self.counts = [s.images for s in manifest.shards]
        self.rank, self.world_size, self.seed = rank, world_size, seed
        self.images_per_epoch, self.batch_size = images_per_epoch, batch_size
        self.transform = transform
        self._samples: Iterator[tuple[str, bytes, int]] | None = None

    def __len__(self) -> int:
        return self.images_per_epoch

    def __iter__(self) -> Iterator[tuple[Any, int]]:
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info else (0, 1)
        if self._samples is None:
            self._samples = self._stream(self.rank * workers + worker, self.world_size * workers)
        batches = self.images_per_epoch // self.batch_size
        mine = (batches // workers + (worker < batches % workers)) * self.batch_size
        encoded = itertools.islice(self._samples, mine)
        return (load_sample(*sample, self.transform) for sample in encoded)

    def _stream(self, stream: int, streams: int) -> Iterator[tuple[str, bytes, int]]:
        """Encoded samples of this stream's shards, reshuffled at each pass, kept across
        epochs (a loader's persistent workers keep it too) so no buffered sample is lost."""

        mine = stream_shards(len(self.paths), streams, stream, self.seed)
        rng = random.Random(self.seed * 7919 + stream)

        def passes() -> Iterator[tuple[str, bytes, int]]:
            while True:
                for i in rng.sample(mine, len(mine)):
                    yield from read_shard(self.paths[i], self.counts[i])

        return _shuffled(passes(), SHUFFLE_BUFFER, rng)


def _shuffled(items: Iterator[Any], size: int, rng: random.Random) -> Iterator[Any]:
    buffer: list[Any] = []
    for item in items:
        if len(buffer) < size:
            buffer.append(item)
            continue
        k = rng.randrange(size)
        yield buffer[k]
        buffer[k] = item
    rng.shuffle(buffer)
    yield from buffer


def shard_loader(root: str | os.PathLike[str], *, batch_size: int, workers: int,
                 pin_memory: bool, seed: int, rank: int, world_size: int,
                 transform: Callable[[Image.Image], Any]) -> DataLoader:  # fmt: skip
    """This rank's loader over the shards at ``root``: as many full batches per epoch as
    the whole data set gives every rank (like ``build_loader`` with ``drop_last``)."""
    manifest = validate_shard_dir(root)
    batches = manifest.images // (batch_size * world_size)
    dataset = ShardImages(root, manifest, rank=rank, world_size=world_size,
                          images_per_epoch=batches * batch_size, batch_size=batch_size,
                          transform=transform, seed=seed)  # fmt: skip
    return DataLoader(
        dataset,
        batch_size=batch_size,
        num_workers=workers,
        pin_memory=pin_memory,
        drop_last=True,
        persistent_workers=workers > 0,
        generator=torch.Generator().manual_seed(seed + rank),
    )
