"""FLOPs of one sample of a built-in workload's model, counted with
``torch.utils.flop_counter.FlopCounterMode`` on one image of the run's size, in the process
that asks (never in the ranks). The diagnosis and the projection both use it.

Counting builds the model (torch and torchvision imported: ~4 s of CPU), so each count is
kept in ``$XDG_CACHE_HOME/scalescope/model-flops.json`` (``~/.cache`` by default), keyed by
the model, image size, classes and the installed torch and torchvision versions: a second
``report`` of a bench run reads the number instead of building the model again.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

CACHE_NAME = "model-flops.json"


@dataclass(frozen=True)
class ModelFlops:
    """FLOPs of the run's model per sample, counted by torch.utils.flop_counter."""

    model: str
    image_size: int
    forward_flops: float
    """Of one sample's forward pass (a multiply-add counts 2)."""

    @property
    def train_flops(self) -> float:
        """Forward + backward: backward costs about twice the forward."""
        return 3.0 * self.forward_flops


def _num_classes(options: dict[str, Any]) -> int:
    data = options.get("data")
    if data:
        from pathlib import Path

        root = Path(data)
        if root.is_dir():
            return max(1, sum(1 for p in root.iterdir() if p.is_dir()))
    return int(options.get("num_classes") or 1000)


def cache_path() -> Path | None:
    """None when there is no home to keep it in (a batch job with no HOME nor passwd entry)."""
    root = os.environ.get("XDG_CACHE_HOME")
    if not root:
        try:
            root = Path.home() / ".cache"
        except RuntimeError:
            return None
    return Path(root) / "scalescope" / CACHE_NAME


def _cache_key(model: str, image_size: int, num_classes: int) -> str:
    versions = []
    for package in ("torch", "torchvision"):
        try:
            versions.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{package} none")
    return f"{model} {image_size}px {num_classes} classes; {', '.join(versions)}"


def _read_cache(path: Path) -> dict[str, float]:
    """The counts kept so far; a missing, unreadable or damaged file is an empty cache."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: float(v) for k, v in data.items() if isinstance(v, int | float)}


def _write_cache(path: Path, counts: dict[str, float]) -> None:
    """Atomically, so ranks or tests counting at once never read half a file; a home that
    cannot be written only loses the cache."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False) as f:
            json.dump(counts, f, indent=1, sort_keys=True)
        os.replace(f.name, path)
    except OSError:
        return


@lru_cache(maxsize=16)
def _forward_flops(model: str, image_size: int, num_classes: int) -> float:
    path, key = cache_path(), _cache_key(model, image_size, num_classes)
    kept = None if path is None else _read_cache(path).get(key)
    if kept is not None:
        return kept
    flops = _count_forward_flops(model, image_size, num_classes)
    if path is not None:
        _write_cache(path, _read_cache(path) | {key: flops})
    return flops


def _count_forward_flops(model: str, image_size: int, num_classes: int) -> float:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from scalescope.bench.models import build_model

    net = build_model(model, num_classes, image_size=image_size).eval()
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        net(torch.zeros(1, 3, image_size, image_size))
    return float(counter.get_total_flops())


def count_model_flops(workload: str, options: dict[str, Any]) -> ModelFlops | None:
    """FLOPs of one sample of a bench run's model (None for scripts or unknown models)."""
    model, size = options.get("model") or workload, options.get("image_size")
    if workload == "script" or not model or not isinstance(size, int):
        return None
    try:
        forward = _forward_flops(model, size, _num_classes(options))
    except (ValueError, RuntimeError, TypeError):
        return None
    return ModelFlops(model=model, image_size=size, forward_flops=forward)
