"""What building or listing the built-in models once tells (their FLOPs, their forward pass's
memory traffic, torchvision's model names), kept on disk: that imports torch and
torchvision and runs a forward pass, up to ~4 s of CPU that a second ``report``,
``project`` or ``bench`` launcher should not pay again.

The file is ``$XDG_CACHE_HOME/scalescope/model-costs.json`` (``~/.cache`` by default); a key
names what was counted, the model, image size, classes and the installed torch and
torchvision versions, so an upgrade counts again.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from functools import lru_cache
from importlib import metadata
from pathlib import Path

CACHE_NAME = "model-costs.json"


def cache_path() -> Path | None:
    """None when there is no home to keep it in (a batch job with no HOME nor passwd entry)."""
    root = os.environ.get("XDG_CACHE_HOME")
    if not root:
        try:
            root = Path.home() / ".cache"
        except RuntimeError:
            return None
    return Path(root) / "scalescope" / CACHE_NAME


@lru_cache(maxsize=1)
def _versions() -> str:
    versions = []
    for package in ("torch", "torchvision"):
        try:
            versions.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{package} none")
    return ", ".join(versions)


def cache_key(what: str, model: str | None = None, image_size: int = 0, classes: int = 0) -> str:
    """``what`` of ``model`` at its image size and classes (of torchvision with no model),
    with the installed torch and torchvision versions."""
    about = f"{model} {image_size}px {classes} classes" if model else "torchvision"
    return f"{what}: {about}; {_versions()}"


Kept = tuple[float, ...] | tuple[str, ...]


def _kept(value: object) -> Kept | None:
    """A non-empty list of numbers or of strings, as a tuple; None for anything else."""
    if not isinstance(value, list) or not value:
        return None
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in value):
        return tuple(float(v) for v in value)
    if all(isinstance(v, str) for v in value):
        return tuple(value)
    return None


def read_cache(path: Path) -> dict[str, Kept]:
    """The counts kept so far; a missing, unreadable or damaged file is an empty cache."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    kept = {key: _kept(value) for key, value in data.items()}
    return {key: value for key, value in kept.items() if value is not None}


def _write_cache(path: Path, counts: dict[str, Kept]) -> None:
    """Atomically, so ranks or tests counting at once never read half a file; a home that
    cannot be written only loses the cache."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False) as f:
            json.dump({k: list(v) for k, v in counts.items()}, f, indent=1, sort_keys=True)
        os.replace(f.name, path)
    except OSError:
        return


def kept_or_counted(key: str, count: Callable[[], Kept]) -> Kept:
    """The values kept under ``key``, else ``count()``, kept for the next time."""
    path = cache_path()
    kept = None if path is None else read_cache(path).get(key)
    if kept is not None:
        return kept
    counted = _kept(list(count()))
    if counted is None:
        raise ValueError(f"{key}: nothing to keep")
    if path is not None:
        _write_cache(path, read_cache(path) | {key: counted})
    return counted
