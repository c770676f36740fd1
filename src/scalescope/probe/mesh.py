"""Names the process groups a ``DeviceMesh`` makes by its dimensions (dp, tp, pp, or the
names the user gave), so that each collective's group has a role: the mesh is wrapped at
construction, and each named dimension's group of this rank is labelled with its name.

A mesh made by ``_unflatten`` or ``_flatten`` of another (torchtitan unflattens a 1-D
``world`` mesh into pp, dp, cp, tp) gets its groups after its construction: those methods'
results are named when they return."""

from __future__ import annotations

import functools
from typing import Any

from scalescope.probe.collectives import GroupNames

NOT_YET = "process groups not initialized"
"""torch's words for a mesh whose groups are still to be made (DeviceMesh.get_group)."""
DERIVING = ("_unflatten", "_flatten")
"""``DeviceMesh`` methods that return a new mesh whose groups exist only once they return."""


def _mesh_class() -> Any:
    try:
        from torch.distributed.device_mesh import DeviceMesh
    except ImportError:  # a torch without DeviceMesh: nothing to name
        return None
    return DeviceMesh


class MeshNames:
    """Wraps ``DeviceMesh.__init__``; never fails the user's mesh."""

    def __init__(self, groups: GroupNames) -> None:
        self.groups = groups
        self._cls = None
        self._init = None
        self._saved: dict[str, Any] = {}
        self.errors: list[str] = []

    def install(self) -> None:
        cls = _mesh_class()
        if cls is None or self._init is not None:
            return
        self._cls, self._init = cls, cls.__init__
        original, names = cls.__init__, self

        def __init__(mesh: Any, *args: Any, **kwargs: Any) -> None:
            original(mesh, *args, **kwargs)
            names.name(mesh)

        cls.__init__ = __init__
        for method in DERIVING:
            if (made := cls.__dict__.get(method)) is not None:
                self._saved[method] = made
                setattr(cls, method, self._named_result(made))

    def _named_result(self, method: Any) -> Any:
        names = self

        @functools.wraps(method)
        def derive(mesh: Any, *args: Any, **kwargs: Any) -> Any:
            derived = method(mesh, *args, **kwargs)
            names.name(derived)
            return derived

        return derive

    def uninstall(self) -> None:
        if self._cls is not None and self._init is not None:
            self._cls.__init__ = self._init
            for method, original in self._saved.items():
                setattr(self._cls, method, original)
        self._cls = self._init = None
        self._saved = {}

    def name(self, mesh: Any) -> None:
        """Each named dimension's group of this rank (meshes built before the process group
        was, or without names, are left alone; so are meshes whose groups come later: those
        ``_flatten`` and ``_unflatten`` make, named when they return)."""
        try:
            dims = getattr(mesh, "mesh_dim_names", None) or ()
            for i, dim in enumerate(dims):
                self.groups.name_dim(mesh.get_group(i), str(dim))
        except RuntimeError as exc:
            if NOT_YET not in str(exc):
                self.errors.append(f"mesh dimensions not named: RuntimeError: {exc}")
        except Exception as exc:  # the mesh is the user's: record, never raise
            self.errors.append(f"mesh dimensions not named: {type(exc).__name__}: {exc}")
