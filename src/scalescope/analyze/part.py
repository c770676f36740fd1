"""The descriptor each part of a run's analysis is declared with: computed on first use,
kept, and counted."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class part:  # noqa: N801 (a decorator, as functools.cached_property is)
    """One analysis of ``RunAnalysis`` (analyze/summary.py): computed on first use from the
    parts it reads, then kept in the instance's ``__dict__`` (which a non-data descriptor
    leaves first); each build counted in the instance's ``builds``."""

    def __init__(self, build: Callable[[Any], Any]) -> None:
        self.build = build
        self.name = build.__name__
        self.__doc__ = build.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        obj.builds[self.name] += 1
        value = obj.__dict__[self.name] = self.build(obj)
        return value
