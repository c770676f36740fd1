"""Pack an image folder (one sub-folder per class) into tar shards (``scalescope data pack``).

Images are stored as their original bytes (no re-encoding), in a seeded random order so
that every shard mixes the classes: a streaming reader then needs only a small shuffle
buffer. Each shard is written under a temporary name and renamed once complete; the
manifest is written last, so an interrupted pack never looks complete.
"""

from __future__ import annotations

import hashlib
import io
import os
import random
import tarfile
from collections.abc import Callable
from pathlib import Path

from torchvision.datasets.folder import IMG_EXTENSIONS, make_dataset

from scalescope.bench.data_check import validate_image_folder
from scalescope.bench.shard_manifest import MANIFEST, SHARD_NAME, Manifest, ShardInfo

TAR_OVERHEAD = 3 * 512
"""Bytes a tar adds per image: a header for the image and for .cls, and their padding."""
Progress = Callable[[int, int], None]
"""Called with (bytes of the image just packed, bytes of all images)."""


def list_images(folder: Path, seed: int) -> tuple[list[str], list[tuple[str, int]]]:
    """Class names and (path, label) of every image, shuffled with ``seed``."""
    validate_image_folder(folder)
    classes = sorted(e.name for e in os.scandir(folder) if e.is_dir())
    index = {name: i for i, name in enumerate(classes)}
    samples = make_dataset(os.fspath(folder), index, extensions=IMG_EXTENSIONS)
    random.Random(seed).shuffle(samples)
    return classes, samples


def check_output(out: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ValueError(f"{out} exists and is not an empty directory; choose a new OUT")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o444, 0
    tar.addfile(info, io.BytesIO(data))


class _ShardWriter:
    """Writes ``shard-NNNNNN.tar.tmp`` and renames it to ``.tar`` when closed."""

    def __init__(self, out: Path, number: int) -> None:
        self.path = out / SHARD_NAME.format(number)
        self.tmp = self.path.with_name(self.path.name + ".tmp")
        # Open across add() calls; close() or discard() ends them.
        self.file = open(self.tmp, "wb")  # noqa: SIM115
        self.tar = tarfile.open(fileobj=self.file, mode="w", format=tarfile.USTAR_FORMAT)  # noqa: SIM115
        self.images = 0
        self.nbytes = 0

    def add(self, key: str, suffix: str, data: bytes, label: int) -> None:
        _add(self.tar, f"{key}{suffix}", data)
        _add(self.tar, f"{key}.cls", str(label).encode())
        self.images += 1
        self.nbytes += len(data) + TAR_OVERHEAD

    def close(self) -> ShardInfo:
        self.tar.close()
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.close()
        os.replace(self.tmp, self.path)
        return ShardInfo(self.path.name, self.images, self.path.stat().st_size, _sha256(self.path))

    def discard(self) -> None:
        self.file.close()
        self.tmp.unlink(missing_ok=True)


def _image_suffix(path: str) -> str:
    suffix = Path(path).suffix.lower()
    return ".jpg" if suffix == ".jpeg" else suffix


def pack_folder(
    folder: str | os.PathLike[str],
    out: str | os.PathLike[str],
    shard_bytes: int,
    seed: int = 0,
    progress: Progress | None = None,
) -> Manifest:
    """Pack the ImageFolder ``folder`` into shards of about ``shard_bytes`` under ``out``.

    A shard closes before the image that would take it past ``shard_bytes`` (an image larger
    than that gets a shard of its own). Keys number the images 000000, 000001, ... across
    shards. ValueError (one line) for a bad folder or an ``out`` that holds files.
    """
    source, target = Path(folder), Path(out)
    classes, samples = list_images(source, seed)
    check_output(target)
    target.mkdir(parents=True, exist_ok=True)
    total = sum(os.path.getsize(p) for p, _ in samples) if progress else 0
    shards: list[ShardInfo] = []
    writer: _ShardWriter | None = None
    try:
        for key, (path, label) in enumerate(samples):
            data = Path(path).read_bytes()
            if writer and writer.images and writer.nbytes + len(data) > shard_bytes:
                shards.append(writer.close())
                writer = None
            writer = writer or _ShardWriter(target, len(shards))
            writer.add(f"{key:06d}", _image_suffix(path), data, label)
            if progress:
                progress(len(data), total)
        if writer:
            shards.append(writer.close())
            writer = None
    finally:
        if writer:
            writer.discard()
    manifest = Manifest(str(source.resolve()), tuple(classes), tuple(shards))
    tmp = target / (MANIFEST + ".tmp")
    tmp.write_text(manifest.to_json())
    os.replace(tmp, target / MANIFEST)
    return manifest
