"""Run a callback when a module is imported, without importing it first.

The probe patches FSDP2 only in scripts that use it: importing FSDP costs a rank seconds.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any


class _AfterImport(importlib.abc.MetaPathFinder):
    def __init__(self, name: str, callback: Callable[[ModuleType], None]) -> None:
        self.name = name
        self.callback = callback

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader, callback = spec.loader, self.callback
        original = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            original(module)
            callback(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def when_imported(name: str, callback: Callable[[ModuleType], None]) -> Callable[[], None]:
    """Call ``callback(module)`` now if ``name`` is imported, else once it is; returns what
    stops waiting."""
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
        return lambda: None
    finder = _AfterImport(name, callback)
    sys.meta_path.insert(0, finder)

    def stop() -> None:
        if finder in sys.meta_path:
            sys.meta_path.remove(finder)

    return stop
