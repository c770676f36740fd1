"""What the commands share: the app, the one call of a command's entry point and the error
line."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import typer
from rich.text import Text

from scalescope.commands.common import CommandError, err, require_run_extra

Options = TypeVar("Options")

app = typer.Typer(
    help="Launch, profile and report on distributed PyTorch training.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
PASSTHROUGH = {"allow_extra_args": True, "ignore_unknown_options": True}


def fail(message: str, code: int = 2) -> None:
    err.print(Text.assemble(("error:", "bold red"), " ", message))
    raise typer.Exit(code)


def needs_run_extra(command: str) -> None:
    """Where torch (or another module of the ``run`` extra) is missing, ``error: scalescope
    COMMAND needs torch: …`` before the command's journey imports it."""
    try:
        require_run_extra(command)
    except CommandError as exc:
        fail(exc.message, exc.code)


def drive(entry: Callable[[Options], int | None], options: Options) -> None:
    """Call a command's one entry point (commands/) with its options; exit with its code, or
    with ``error: MESSAGE`` and the error's code when it refuses."""
    try:
        code = entry(options)
    except CommandError as exc:
        fail(exc.message, exc.code)
        raise
    raise typer.Exit(code or 0)
