"""FSDP2's knobs that ``scalescope tune`` searches, applied to any script's ``fully_shard``.

- ``SCALESCOPE_FSDP_RESHARD`` (true/false): every ``fully_shard`` call's
  ``reshard_after_forward``. False keeps each unit's parameters gathered from forward to
  backward: one all-gather per unit and step instead of two, for more memory.
- ``SCALESCOPE_FSDP_PREFETCH`` (N >= 1): explicit prefetching N units ahead, forward and
  backward (``set_modules_to_forward_prefetch`` / ``set_modules_to_backward_prefetch``, as
  the FSDP2 tutorial does with 2); 1 is torch's own implicit one-ahead prefetch, left alone.

The probe wraps ``torch.distributed.fsdp.fully_shard`` once the script imports FSDP2, so a
script's ``from torch.distributed.fsdp import fully_shard`` gets the wrapper. Prefetching is
set when a call shards a module holding every unit sharded before it (the root, sharded
last as FSDP2 requires): the units are those, in the order they were sharded.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

RESHARD_ENV = "SCALESCOPE_FSDP_RESHARD"
PREFETCH_ENV = "SCALESCOPE_FSDP_PREFETCH"
FSDP_ENV = (RESHARD_ENV, PREFETCH_ENV)
MARK = "_scalescope_knobs"
"""Set on a wrapped ``fully_shard`` (bench wraps what the probe may have wrapped already)."""


def fsdp_overrides(environ: Mapping[str, str] = os.environ) -> tuple[bool | None, int]:
    """(reshard_after_forward or None when not set, prefetch depth: 1 when not set); a value
    that does not parse is ignored."""
    reshard = {"true": True, "1": True, "false": False, "0": False}.get(
        environ.get(RESHARD_ENV, "").strip().lower()
    )
    try:
        prefetch = max(1, int(environ.get(PREFETCH_ENV, "1")))
    except ValueError:
        prefetch = 1
    return reshard, prefetch


def set_prefetch(units: list[Any], depth: int) -> None:
    """Each unit prefetches the next ``depth`` in forward and the previous ``depth`` in
    backward."""
    if depth <= 1:
        return
    for i, unit in enumerate(units):
        ahead = units[i + 1 : i + 1 + depth]
        behind = units[max(0, i - depth) : i][::-1]
        if ahead and hasattr(unit, "set_modules_to_forward_prefetch"):
            unit.set_modules_to_forward_prefetch(ahead)
        if behind and hasattr(unit, "set_modules_to_backward_prefetch"):
            unit.set_modules_to_backward_prefetch(behind)


def with_knobs(fully_shard: Callable, environ: Mapping[str, str] = os.environ) -> Callable:
    """``fully_shard`` with the environment's knobs (itself when none is set)."""
    reshard, prefetch = fsdp_overrides(environ)
    if (reshard is None and prefetch <= 1) or getattr(fully_shard, MARK, False):
        return fully_shard
    sharded: list[Any] = []

    @functools.wraps(fully_shard)
    def shard(module: Any, *args: Any, **kwargs: Any) -> Any:
        if reshard is not None:
            kwargs["reshard_after_forward"] = reshard
        out = fully_shard(module, *args, **kwargs)
        inner = {id(m) for m in module.modules()} if hasattr(module, "modules") else set()
        if sharded and all(id(u) in inner for u in sharded):
            set_prefetch(list(sharded), prefetch)
            sharded.clear()
        else:
            sharded.append(module)
        return out

    setattr(shard, MARK, True)
    return shard


class FSDPKnobs:
    """Replaces ``torch.distributed.fsdp.fully_shard`` once the script imports it."""

    def __init__(self) -> None:
        self._module: ModuleType | None = None
        self._saved: Any = None
        self._stop_waiting: Callable[[], None] = lambda: None

    def install(self) -> None:
        from scalescope.probe.post_import import when_imported

        if fsdp_overrides() != (None, 1):
            self._stop_waiting = when_imported("torch.distributed.fsdp", self._patch)

    def _patch(self, module: ModuleType) -> None:
        original = getattr(module, "fully_shard", None)
        if original is None or self._saved is not None:
            return
        self._module, self._saved = module, original
        module.fully_shard = with_knobs(original)

    def uninstall(self) -> None:
        self._stop_waiting()
        if self._module is not None:
            self._module.fully_shard = self._saved
        self._module = self._saved = None
