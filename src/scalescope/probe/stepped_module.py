"""The model an optimizer steps, for a script without DDP: the outermost module holding every
parameter the optimizer updates, found once among the collector's objects, and the bytes of
those parameters."""

from __future__ import annotations

import gc
import warnings
import weakref
from typing import Any

import torch


def param_bytes(optimizer: Any) -> int:
    """Bytes of the parameters ``optimizer`` updates."""
    return sum(p.numel() * p.element_size() for g in optimizer.param_groups for p in g["params"])


def _is_module(obj: Any) -> bool:
    """``isinstance`` that survives a dead weak proxy among the collector's objects (it
    raises ReferenceError on any attribute; torchtitan leaves some)."""
    if type(obj) in weakref.ProxyTypes:
        return False
    try:
        return isinstance(obj, torch.nn.Module)
    except ReferenceError:
        return False


def stepped_module(optimizer: Any) -> torch.nn.Module | None:
    """The outermost module holding every parameter ``optimizer`` steps, and no others."""
    wanted = {id(p) for group in optimizer.param_groups for p in group["params"]}
    if not wanted:
        return None
    with warnings.catch_warnings():  # isinstance on deprecated torch aliases warns
        warnings.simplefilter("ignore")
        found = [
            obj
            for obj in gc.get_objects()
            if _is_module(obj) and {id(p) for p in obj.parameters()} == wanted
        ]
    inner = {id(child) for m in found for child in m.modules() if child is not m}
    outer = [m for m in found if id(m) not in inner]
    return outer[0] if outer else None
