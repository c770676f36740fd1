"""Every process group torch creates, as it creates it: what the group hooks
(probe/group_hooks.py) and the intercepted c10d ops (probe/dispatched.py) attach to.

Groups are found when torch registers one (``_register_pg_in_world``), at
``init_process_group``, and at each flush; they are let go before ``destroy_process_group``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from scalescope.probe.collectives import UNKNOWN_GROUP, GroupNames
from scalescope.probe.recorder import Recorder


class GroupDiscovery:
    """Calls ``_attach`` once for each group torch knows, ``_detach`` as it goes."""

    def __init__(self, recorder: Recorder, groups: GroupNames) -> None:
        self.recorder = recorder
        self.groups = groups
        self._hooked: dict[int, Any] = {}
        self._saved: dict[str, Any] = {}
        self._errors: set[str] = set()

    def _attach(self, pg: Any, label: str) -> None:
        raise NotImplementedError

    def _detach(self, pg: Any) -> None:
        raise NotImplementedError

    def install(self) -> None:
        register = getattr(c10d, "_register_pg_in_world", None)
        if register is not None:
            self._saved["_register_pg_in_world"] = register
            c10d._register_pg_in_world = self._after(register)
        self._saved["init_process_group"] = dist.init_process_group
        dist.init_process_group = self._after(dist.init_process_group)
        self._saved["destroy_process_group"] = dist.destroy_process_group
        dist.destroy_process_group = self._detaching(dist.destroy_process_group)
        self.recorder.before_flush.append(self.attach_new)
        self.attach_new()

    def uninstall(self) -> None:
        """Let go of every group and remove the patches; the recorder's last flush then
        attaches nothing again."""
        if self.attach_new in self.recorder.before_flush:
            self.recorder.before_flush.remove(self.attach_new)
        for name, original in self._saved.items():
            setattr(c10d if name.startswith("_") else dist, name, original)
        self._saved.clear()
        for pg in list(self._hooked.values()):
            self._detach(pg)
        self._hooked.clear()

    def _after(self, original: Callable) -> Callable:
        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            self.attach_new()
            return result

        return wrapper

    def _detaching(self, original: Callable) -> Callable:
        """destroy_process_group: the probe lets go of the groups torch destroys."""

        @functools.wraps(original)
        def destroy(group: Any = None, *args: Any, **kwargs: Any) -> Any:
            doomed = list(self._hooked) if group is None else [id(group)]
            for key in doomed:
                pg = self._hooked.pop(key, None)
                if pg is not None:
                    self._detach(pg)
            return original(group, *args, **kwargs)

        return destroy

    def attach_new(self) -> None:
        """Attach to each group torch knows and the probe has not attached to yet."""
        try:
            groups = list(c10d._world.pg_map)
        except Exception:  # no world yet, or a torch that keeps it elsewhere
            return
        for pg in groups:
            if id(pg) not in self._hooked:
                self._attach_one(pg)

    def _attach_one(self, pg: Any) -> None:
        label = self._label(pg)
        try:
            self._attach(pg, label)
        except Exception as exc:
            self._error(f"collectives of group {label} not observed: {exc}")
            return
        self._hooked[id(pg)] = pg

    def _label(self, pg: Any) -> str:
        try:
            return self.groups.label(pg)
        except Exception:
            return UNKNOWN_GROUP

    def _error(self, text: str) -> None:
        if text not in self._errors:
            self._errors.add(text)
            self.recorder.errors.append(text)
