"""The machinery every command's options are declared with: each field carries its flag, its
panel in ``--help`` and typer's bounds (``option``, ``Flag``); its docstring is its help;
``__post_init__`` refuses a bad value with the flag's name. cli/ generates the typer parameters
from these fields.

Kept free of torch and of the launcher's heavy modules: every command line builds them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

FLAGS, PANEL, BOUNDS, ARGUMENT, GROUP = "flags", "panel", "bounds", "argument", "group"
"""The keys of a command-line field's metadata."""


@dataclass(frozen=True)
class Flag:
    """An option's names and bounds, declared once and used by each command that takes it
    (each with its own default, panel and docstring as help)."""

    names: tuple[str, ...]
    bounds: Mapping[str, Any] = field(default_factory=dict)

    def __call__(
        self,
        default: Any = None,
        *aliases: str,
        off: str | None = None,
        panel: str | None = None,
        **extra: Any,
    ) -> Any:
        """The dataclass field of this option (``...``: required); ``aliases`` are a command's
        old names for it, ``off`` the flag that turns it off; ``extra`` adds or overrides typer
        keywords (``metavar``, ``min``)."""
        first = f"{self.names[0]}/{off}" if off else self.names[0]
        names = (first, *self.names[1:], *aliases)
        metadata = {FLAGS: names, PANEL: panel, BOUNDS: {**self.bounds, **extra}}
        if default is ...:
            return field(metadata=metadata)
        return field(default=default, metadata=metadata)


def option(*names: str, default: Any = None, panel: str | None = None, **bounds: Any) -> Any:
    """A field that is an option of one command only: its flags (``"--map-by"``, or typer's
    ``"--x/--no-x"``), panel and bounds (``min=1``)."""
    return Flag(names)(default, panel=panel, **bounds)


def argument(default: Any = ..., **bounds: Any) -> Any:
    """A field that is a positional argument (``...``: required)."""
    metadata = {ARGUMENT: True, BOUNDS: bounds}
    if default is ...:
        return field(metadata=metadata)
    return field(default=default, metadata=metadata)


def group(cls: type) -> Any:
    """A field that holds a group of options (a dataclass of them), all at their defaults
    unless given."""
    return field(default_factory=cls, metadata={GROUP: True})


NPROC = Flag(("--nproc-per-node", "-n"), {"min": 1})
"""Ranks on this node: run, bench, comm, tune (and env, for its checks)."""
RUN_DIR = Flag(("--run-dir",))
"""Where a command records; tune, scale and suite take it with their own help."""
HTML = Flag(("--html",))
