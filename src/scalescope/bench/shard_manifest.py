"""The manifest of a shard directory and its checks, without torch: ``bench`` and ``data``
check a ``--data`` directory before any rank starts, and importing torch for that cost a
refused command ~2 s (the reader is in ``bench.shards``)."""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path

MANIFEST = "manifest.json"
FORMAT = "scalescope-shards/1"
SHARD_NAME = "shard-{:06d}.tar"
SIZE_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
              "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}  # fmt: skip


class ShardError(ValueError):
    """A shard directory or shard is missing, incomplete or damaged (a one-line message)."""


@dataclass(frozen=True)
class ShardInfo:
    name: str
    images: int
    nbytes: int
    sha256: str


@dataclass(frozen=True)
class Manifest:
    """What ``data pack`` wrote: class names (index = label) and every shard."""

    source: str
    classes: tuple[str, ...]
    shards: tuple[ShardInfo, ...]

    @property
    def images(self) -> int:
        return sum(s.images for s in self.shards)

    @property
    def nbytes(self) -> int:
        return sum(s.nbytes for s in self.shards)

    def to_json(self) -> str:
        body = {"format": FORMAT, "source": self.source, "classes": list(self.classes),
                "images": self.images, "shards": [asdict(s) for s in self.shards]}  # fmt: skip
        return json.dumps(body, indent=1) + "\n"


def parse_size(text: str) -> int:
    """Bytes of ``256MB``, ``1.5GiB``, ``4096``: decimal (kB, MB, GB) or binary (KiB, MiB)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", text)
    unit = match.group(2).upper() if match else ""
    if match is None or unit not in SIZE_UNITS:
        raise ValueError(f"size {text!r} is not like 256MB, 1GiB or 4096 (bytes)")
    value = int(float(match.group(1)) * SIZE_UNITS[unit])
    if value < 1:
        raise ValueError(f"size {text!r} must be at least 1 byte")
    return value


def is_shard_dir(path: str | os.PathLike[str]) -> bool:
    return (Path(path) / MANIFEST).is_file()


def read_manifest(path: str | os.PathLike[str]) -> Manifest:
    """The manifest of the shard directory ``path``; ShardError if it is missing or bad."""
    file = Path(path) / MANIFEST
    try:
        body = json.loads(file.read_text())
        if body.get("format") != FORMAT:
            raise ValueError(f"format {body.get('format')!r}, expected {FORMAT!r}")
        shards = tuple(ShardInfo(**s) for s in body["shards"])
        manifest = Manifest(str(body["source"]), tuple(body["classes"]), shards)
    except FileNotFoundError:
        raise ShardError(f"{path}: no {MANIFEST}; pack it with `scalescope data pack`") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ShardError(f"{file}: not a shard manifest ({exc})") from None
    if not manifest.shards or not manifest.classes:
        raise ShardError(f"{file}: lists no shards or no classes")
    return manifest


def validate_shard_dir(path: str | os.PathLike[str]) -> Manifest:
    """The manifest, once every shard it lists is present with the size it records."""
    manifest = read_manifest(path)
    for shard in manifest.shards:
        file = Path(path) / shard.name
        try:
            size = file.stat().st_size
        except OSError:
            raise ShardError(f"shard {file} is missing; pack or stage again") from None
        if size != shard.nbytes:
            raise ShardError(
                f"shard {file} has {size} bytes, the manifest says {shard.nbytes}: "
                "truncated or damaged; pack or stage again"
            )
    return manifest
