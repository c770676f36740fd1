"""FLOPs of one sample of a built-in workload's model, counted with
``torch.utils.flop_counter.FlopCounterMode`` on one image of the run's size, in the process
that asks (never in the ranks). The diagnosis and the projection both use it.

Counting builds the model, so each count is kept on disk (``bench.model_cache``): a second
``report`` of a bench run reads the number instead of building the model again.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from scalescope.bench.extras import RUN_EXTRA, installed
from scalescope.bench.model_cache import cache_key, kept_or_counted

SCRIPT_MODEL_UNKNOWN = "model FLOPs are counted for bench runs only (a script's model is unknown)"
TORCH_NEEDED = f"counting the model's FLOPs needs torch ({RUN_EXTRA})"


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


@lru_cache(maxsize=16)
def _forward_flops(model: str, image_size: int, num_classes: int) -> float:
    key = cache_key("forward FLOPs", model, image_size, num_classes)
    (flops,) = kept_or_counted(key, lambda: (_count_forward_flops(model, image_size, num_classes),))
    return flops


def _count_forward_flops(model: str, image_size: int, num_classes: int) -> float:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from scalescope.bench.models import build_model

    net = build_model(model, num_classes, image_size=image_size).eval()
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        net(torch.zeros(1, 3, image_size, image_size))
    return float(counter.get_total_flops())


def _model_and_size(workload: str, options: dict[str, Any]) -> tuple[str, int] | None:
    """The bench model and image size whose FLOPs can be counted; None for a script or a
    run (an ingested trace) that names neither."""
    model, size = options.get("model") or workload, options.get("image_size")
    if workload == "script" or not model or not isinstance(size, int):
        return None
    return model, size


def count_model_flops(workload: str, options: dict[str, Any]) -> ModelFlops | None:
    """FLOPs of one sample of a bench run's model: None for scripts, unknown models, or
    where neither torch nor the kept count is at hand (an analysis-only install)."""
    named = _model_and_size(workload, options)
    if named is None:
        return None
    model, size = named
    try:
        forward = _forward_flops(model, size, _num_classes(options))
    except (ImportError, ValueError, RuntimeError, TypeError):
        return None
    return ModelFlops(model=model, image_size=size, forward_flops=forward)


def why_no_flops(workload: str, options: dict[str, Any]) -> str:
    """Why ``count_model_flops`` found nothing for this run, in words."""
    if _model_and_size(workload, options) is not None and not installed("torch"):
        return TORCH_NEEDED
    return SCRIPT_MODEL_UNKNOWN
