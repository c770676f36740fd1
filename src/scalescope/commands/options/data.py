"""The options of ``scalescope data pack|stage|bench``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from scalescope.commands.options.shared import BATCH_SIZE, IMAGE_SIZE, SEED, WORKERS
from scalescope.launch.options.fields import argument, option


@dataclass(frozen=True, kw_only=True)
class PackCommand:
    """The options of ``scalescope data pack``."""

    folder: Path = argument()
    """An ImageFolder: FOLDER/<class>/<image>."""
    out: Path = argument()
    """A new (or empty) directory for the shards."""
    shard_size: str = option("--shard-size", default="256MB")
    """Bytes per shard, e.g. 256MB, 1GiB."""
    seed: int = SEED(0)
    """Seed of the image order (classes mixed in shards)."""


@dataclass(frozen=True, kw_only=True)
class StageCommand:
    """The options of ``scalescope data stage``."""

    shards: Path = argument()
    """A shard directory written by `data pack`."""
    dest: Path = argument()
    """Node-local directory, e.g. /dev/shm/train."""
    timeout_s: float = option("--timeout", default=3600.0)
    """Seconds the other ranks wait for the copy."""


@dataclass(frozen=True, kw_only=True)
class DataBenchCommand:
    """The options of ``scalescope data bench``."""

    paths: tuple[Path, ...] = argument()
    """Image folders and/or shard directories."""
    workers: str = WORKERS("0,2")
    """Loader worker counts to try, e.g. 0,2,4."""
    images: int = option("--images", default=512, min=1)
    """Images timed per run."""
    batch_size: int = BATCH_SIZE(32)
    """Images per batch."""
    image_size: int = IMAGE_SIZE(224)
    """Crop size of the training transforms."""
    rounds: int = option("--rounds", default=3, min=1)
    """Interleaved rounds; the median is reported."""
    cold: bool = option("--cold", default=False)
    """Drop the data's files from the page cache before every run (no root needed): a first
    epoch, a data set bigger than RAM, a parallel file system."""
