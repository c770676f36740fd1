"""FSDP2 (``fully_shard``): tag each unit's all-gather and gradient reduce-scatter.

The collectives themselves are recorded by the group hooks whoever issues them; this only
says which unit they belong to, by setting the tag while FSDP's parameter group unshards
(the all-gather) and while it runs its post-backward (the reduce-scatter, and HSDP's
all-reduce). The unit is the module's qualified name from the root (``root`` for the root).
A torch without FSDP2, or whose FSDP2 has other method names, is left as it is: its
collectives are still recorded, tagged ``user``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import ModuleType
from typing import Any

from scalescope.events.tags import REDUCE_GRADS, UNSHARD, unit_tag
from scalescope.probe.context import tagged
from scalescope.probe.post_import import when_imported

METHODS = {"unshard": UNSHARD, "post_backward": REDUCE_GRADS}


PARAM_GROUP_MODULE = "torch.distributed.fsdp._fully_shard._fsdp_param_group"


class FSDPPatch:
    """Patches FSDP2's parameter group once the script imports FSDP2 (never imports it)."""

    def __init__(self) -> None:
        self._saved: dict[str, Any] = {}
        self._cls: Any = None
        self._stop_waiting: Callable[[], None] = lambda: None

    def install(self) -> None:
        self._stop_waiting = when_imported(PARAM_GROUP_MODULE, self._patch)

    def _patch(self, module: ModuleType) -> None:
        cls = getattr(module, "FSDPParamGroup", None)
        if cls is None or not all(hasattr(cls, name) for name in METHODS) or self._saved:
            return
        self._cls = cls
        for name, kind in METHODS.items():
            original = getattr(cls, name)
            self._saved[name] = original
            setattr(cls, name, _tagging(original, kind))

    def uninstall(self) -> None:
        self._stop_waiting()
        for name, original in self._saved.items():
            setattr(self._cls, name, original)
        self._saved.clear()


def _tagging(original: Any, kind: str) -> Any:
    @functools.wraps(original)
    def method(group: Any, *args: Any, **kwargs: Any) -> Any:
        with tagged(unit_tag(kind, getattr(group, "_module_fqn", None))):
            return original(group, *args, **kwargs)

    return method
