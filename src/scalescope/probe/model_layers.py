"""The kinds of layers a model is made of, as shares of its parameters.

The compute remedies depend on them: channels_last helps convolutions only, fused
attention helps attention only. The model is walked once, at the rank's end, from the
module whose forward the probe timed; a wrapper (DDP's ``module``) is walked through like
any other module.

Parameters inside a module whose class name holds ``Attention`` (``nn.MultiheadAttention``,
a GPT script's ``CausalSelfAttention`` of ``nn.Linear``) count as attention, unless they
belong to a layer of another kind (a convolution or a norm inside the block stays one).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from torch import nn

KINDS = (
    "convolution",
    "attention",
    "recurrent",
    "linear",
    "embedding",
    "normalization",
    "other",
)
ATTENTION_WORD = "attention"
LINEAR_NAMES = ("Conv1D",)
"""Classes that are linear layers by another name (Hugging Face GPT-2's ``Conv1D``)."""
_CONV = (nn.modules.conv._ConvNd,)
_RECURRENT = (nn.RNNBase, nn.RNNCellBase)
_LINEAR = (nn.Linear, nn.Bilinear)
_EMBEDDING = (nn.Embedding, nn.EmbeddingBag)
_NORM = (nn.modules.batchnorm._NormBase, nn.LayerNorm, nn.GroupNorm)


@dataclass(frozen=True)
class LayerParams:
    """Parameter elements per layer kind (each parameter counted once)."""

    numel: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.numel.values())

    def shares(self) -> dict[str, float]:
        """% of the parameters per kind that has any; empty for a model without any."""
        total = self.total
        return {k: round(100 * n / total, 2) for k, n in self.numel.items() if n and total}


def _is_attention(module: nn.Module) -> bool:
    return ATTENTION_WORD in type(module).__name__.lower()


def _own_kind(module: nn.Module) -> str | None:
    """The kind of a layer by its type; None for a container or a custom module."""
    if isinstance(module, _CONV):
        return "convolution"
    if isinstance(module, _RECURRENT):
        return "recurrent"
    if isinstance(module, _LINEAR) or type(module).__name__ in LINEAR_NAMES:
        return "linear"
    if isinstance(module, _EMBEDDING):
        return "embedding"
    if isinstance(module, _NORM) or "norm" in type(module).__name__.lower():
        return "normalization"
    return None


def kind_of(module: nn.Module, in_attention: bool) -> str:
    """The kind the module's own parameters count as."""
    kind = _own_kind(module)
    if in_attention and kind in (None, "linear"):
        return "attention"
    return kind or "other"


def _walk(module: nn.Module, in_attention: bool) -> Iterator[tuple[nn.Module, bool]]:
    in_attention = in_attention or _is_attention(module)
    yield module, in_attention
    for child in module.children():
        yield from _walk(child, in_attention)


class Unknowable(ValueError):
    """The parameters do not show the layers (FSDP1's flattened parameters)."""


def layer_params(model: nn.Module) -> LayerParams:
    numel = dict.fromkeys(KINDS, 0)
    seen: set[int] = set()
    for module, in_attention in _walk(model, False):
        kind = kind_of(module, in_attention)
        for param in module.parameters(recurse=False):
            if getattr(param, "_is_flat_param", False):  # what isinstance(FlatParameter) reads
                raise Unknowable("FSDP's flattened parameters hide the layers")
            if id(param) in seen or isinstance(param, nn.parameter.UninitializedParameter):
                continue
            seen.add(id(param))
            numel[kind] += param.numel()
    return LayerParams(numel)


def layer_shares(model: nn.Module | None) -> dict[str, float] | None:
    """% of the model's parameters per layer kind; None when it cannot be told (no model,
    no parameters, flattened parameters)."""
    if model is None:
        return None
    try:
        shares = layer_params(model).shares()
    except Unknowable:
        return None
    return shares or None
