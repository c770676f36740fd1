"""torchvision classification models, built from scratch (never downloads weights)."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from scalescope.bench.model_cache import cache_key, kept_or_counted

if TYPE_CHECKING:
    from torch import nn


@cache
def _model_names() -> tuple[str, ...]:
    """Kept on disk per torchvision version (``bench.model_cache``): listing them imports
    torchvision, ~1.7 s of CPU that the launcher would spend before any rank starts."""
    names = kept_or_counted(cache_key("model names"), _list_models)
    return tuple(str(n) for n in names)


def _list_models() -> tuple[str, ...]:
    import torchvision

    return tuple(sorted(torchvision.models.list_models(module=torchvision.models)))


def classification_models() -> list[str]:
    """Names of torchvision's image classification models, sorted."""
    return list(_model_names())


def validate_model(name: str) -> None:
    """Raise `ValueError` (one line, with the valid names) if `name` is not a known model."""
    if name not in _model_names():
        raise ValueError(f"unknown model {name!r}; valid models: {', '.join(_model_names())}")


def _builder_kwargs(name: str, image_size: int | None) -> dict[str, Any]:
    """Keyword arguments that make the model train like the others.

    googlenet and inception_v3 otherwise return auxiliary outputs in training mode (and warn
    about their initialisation); ViT and MaxViT fix their input size at construction.
    """
    kwargs: dict[str, Any] = {}
    if name in ("googlenet", "inception_v3"):
        kwargs.update(aux_logits=False, init_weights=True)
    if image_size is not None and name.startswith("vit_"):
        kwargs["image_size"] = image_size
    if image_size is not None and name.startswith("maxvit_"):
        kwargs["input_size"] = (image_size, image_size)
    return kwargs


def build_model(name: str, num_classes: int, image_size: int | None = None) -> nn.Module:
    """A randomly initialised `name` with `num_classes` outputs.

    `image_size` is only needed by models whose input size is fixed at construction (ViT,
    MaxViT); the others accept any size large enough for their downsampling.
    """
    import torchvision

    validate_model(name)
    return torchvision.models.get_model(
        name, weights=None, num_classes=num_classes, **_builder_kwargs(name, image_size)
    )
