"""FLOPs and memory traffic of one training sample of a bench run's model.

FLOPs come from ``torch.utils.flop_counter`` (``diagnose.rules_flops.count_model_flops``);
bytes from a dispatch mode over the same forward pass of one image: every aten op reads its
activation inputs and writes its outputs once, with no cache reuse (an upper bound of the
DRAM traffic). Training moves three forward passes of activations per sample (backward ≈
2 × forward) and, per step whatever the batch, ``PARAM_PASSES`` × the parameters' bytes
(forward reads them, backward reads them and writes gradients, SGD with momentum reads
weights, gradients and momentum and writes two of them). The outputs of the forward pass
are what autograd keeps for backward: the activation memory one more sample costs.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from scalescope.bench.flops import count_model_flops
from scalescope.bench.model_cache import cache_key, kept_or_counted

TRAIN_FACTOR = 3.0
PARAM_PASSES = 8.0


@dataclass(frozen=True, kw_only=True)
class ModelCost:
    model: str
    image_size: int
    flops_per_sample: float
    """Forward + backward, FLOPs (a multiply-add counts 2)."""
    activation_traffic_per_sample: float
    """Forward + backward activation traffic of one sample, bytes (upper bound)."""
    parameter_bytes: float
    activation_bytes_per_sample: float
    """Outputs of the forward pass, kept for backward."""

    def bytes_per_sample(self, batch: float) -> float:
        """Memory traffic of one sample in a step of ``batch`` samples per rank."""
        return self.activation_traffic_per_sample + PARAM_PASSES * self.parameter_bytes / batch


def _is_param(value: Any, params: set[int]) -> bool:
    import torch

    return isinstance(value, torch.Tensor) and value.data_ptr() in params


def _tensor_bytes(value: Any) -> int:
    import torch

    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, list | tuple):
        return sum(_tensor_bytes(v) for v in value)
    return 0


@lru_cache(maxsize=16)
def forward_bytes(model: str, image_size: int, num_classes: int) -> tuple[float, ...]:
    """Activation bytes read + written and written by the forward pass of one image, and
    the parameters' bytes (kept on disk: ``bench.model_cache``)."""
    key = cache_key("forward bytes", model, image_size, num_classes)
    return kept_or_counted(key, lambda: _count_forward_bytes(model, image_size, num_classes))


def _count_forward_bytes(model: str, image_size: int, num_classes: int) -> tuple[float, ...]:
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from scalescope.bench.models import build_model

    net = build_model(model, num_classes, image_size=image_size).eval()
    params = {p.data_ptr() for p in net.parameters()} | {b.data_ptr() for b in net.buffers()}

    class Traffic(TorchDispatchMode):
        moved = written = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            out_bytes = _tensor_bytes(out)
            inputs = [a for a in args if not _is_param(a, params)]
            Traffic.moved += _tensor_bytes(inputs) + out_bytes
            Traffic.written += out_bytes
            return out

    image = torch.zeros(1, 3, image_size, image_size)
    with torch.no_grad(), Traffic():
        net(image)
    param_bytes = sum(_tensor_bytes(p) for p in net.parameters())
    return float(Traffic.moved), float(Traffic.written), float(param_bytes)


def model_cost(workload: str, options: dict[str, Any]) -> ModelCost | None:
    """Per-sample cost of a bench run's model; None for scripts, a model that fails, or
    where neither torch nor the kept count is at hand."""
    flops = count_model_flops(workload, options)
    if flops is None:
        return None
    try:
        moved, written, param_bytes = forward_bytes(
            flops.model, flops.image_size, int(options.get("num_classes") or 1000)
        )
    except (ImportError, ValueError, RuntimeError, TypeError):
        return None
    return ModelCost(
        model=flops.model,
        image_size=flops.image_size,
        flops_per_sample=flops.train_flops,
        activation_traffic_per_sample=TRAIN_FACTOR * moved,
        parameter_bytes=param_bytes,
        activation_bytes_per_sample=written,
    )
