"""Checks of a ``--data`` directory, without torch: ``bench`` refuses a bad one before any
rank starts, in half a second rather than after the ~4 s that importing torch and
torchvision take. The image extensions are torchvision's ImageFolder's (a unit test holds
them equal), so a folder that passes here is one ImageFolder reads."""

from __future__ import annotations

import os
from pathlib import Path

from scalescope.bench.shard_manifest import is_shard_dir, validate_shard_dir

IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
"""``torchvision.datasets.folder.IMG_EXTENSIONS``."""
EXPECTED_LAYOUT = (
    "expected DIR/<class>/<image>: one subdirectory per class, each holding image files ("
    + ", ".join(IMG_EXTENSIONS)
    + "), or shards from `scalescope data pack`"
)


def has_image_extension(name: str) -> bool:
    """As torchvision's ``has_file_allowed_extension(name, IMG_EXTENSIONS)``."""
    return name.lower().endswith(IMG_EXTENSIONS)


def _has_image(directory: str) -> bool:
    for _, _, files in os.walk(directory, followlinks=True):
        if any(has_image_extension(f) for f in files):
            return True
    return False


def _folder_problem(root: Path) -> tuple[str | None, int]:
    """What keeps `root` from being an ImageFolder (None if nothing), and its class count.

    Class folders are found exactly as torchvision's `find_classes` does (every
    subdirectory, hidden ones included), so the count matches what ImageFolder will use.
    """
    classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
    if not classes:
        loose = any(has_image_extension(f.name) for f in os.scandir(root))
        found = "image files but no class subdirectories" if loose else "no class subdirectories"
        return f"has {found}", 0
    empty = [c for c in classes if not _has_image(os.path.join(root, c))]
    if empty:
        shown = ", ".join(empty[:5]) + (f" and {len(empty) - 5} more" if len(empty) > 5 else "")
        return f"class folders without image files: {shown}", len(classes)
    return None, len(classes)


def validate_image_folder(path: str | os.PathLike[str]) -> int:
    """Number of classes of the ImageFolder at `path`; `ValueError` (one line) if it is not one."""
    root = Path(path)
    if not root.exists():
        problem: str | None = "does not exist"
    elif not root.is_dir():
        problem = "is not a directory"
    else:
        problem, num_classes = _folder_problem(root)
    if problem is not None:
        raise ValueError(f"--data {root}: {problem}; {EXPECTED_LAYOUT}")
    return num_classes


def validate_data(path: str | os.PathLike[str]) -> int:
    """Number of classes of a shard directory (``data pack``) or an ImageFolder at ``path``.

    `ValueError` (one line) if it is neither or a shard is missing or truncated.
    """
    if is_shard_dir(path):
        return len(validate_shard_dir(path).classes)
    return validate_image_folder(path)
