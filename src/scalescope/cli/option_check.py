"""Catch what users mistype before a command starts anything.

Commands that pass arguments through to a script (run, scale, tune) let click keep unknown
tokens, so an unknown option in front of the script used to reach the workload, or be taken
for the script itself. ``CheckedCommand`` reads the arguments in front of the script (or
``--``) against the command's own options: an unknown one is a one-line error naming the
closest known option, or the commands it belongs to. Arguments after the script go to the
script untouched. Other usage errors (a bad value, a missing argument) are one line too.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass

import typer
from typer.core import TyperCommand

try:  # recent typer carries its own copy of click
    from typer import _click
except ImportError:  # older typer runs on click itself
    import click as _click  # type: ignore[no-redef]
click_errors = _click.exceptions


@dataclass(frozen=True)
class Unknown:
    """An option a command does not take, and what it might have meant."""

    option: str
    suggestion: str | None
    owners: tuple[str, ...]
    """Other commands that take this exact option."""

    def message(self, command: str) -> str:
        text = f"unknown option {self.option} for {command}"
        if self.owners:
            text += f" (an option of {', '.join(self.owners)})"
        if self.suggestion:
            text += f"; did you mean {self.suggestion}?"
        return text + f" (see scalescope {command} --help)"


def option_arity(params: Iterable[_click.core.Parameter]) -> dict[str, bool]:
    """Every spelling of every option, and whether it takes a value."""
    arity: dict[str, bool] = {}
    for param in params:
        if param.param_type_name != "option":
            continue
        takes_value = not (getattr(param, "is_flag", False) or getattr(param, "count", False))
        for name in (*param.opts, *param.secondary_opts):
            arity[name] = takes_value
    return arity


@dataclass(frozen=True)
class Scan:
    unknown: str | None
    """The first option the command does not take, or None."""
    head_end: int
    """Where the command's own arguments end: after the script (or the one after ``--``),
    or at the end; what follows goes to the script as given."""


def scan(args: list[str], arity: dict[str, bool], passthrough: bool) -> Scan:
    """Read the command's own arguments; stop at the script when it passes the rest through."""
    i = 0
    while i < len(args):
        token = args[i]
        if token == "--" and passthrough:
            return Scan(None, min(i + 2, len(args)))
        if not token.startswith("-") or token in ("-", "--"):
            if passthrough:
                return Scan(None, i + 1)
            i += 1
            continue
        name = token.partition("=")[0] if token.startswith("--") else token[:2]
        if name not in arity:
            return Scan(name, i)
        takes_value = arity[name] and name == token
        i += 2 if takes_value else 1
    return Scan(None, len(args))


def closest(option: str, known: Iterable[str]) -> str | None:
    """The known long option spelled most like ``option``, compared without the dashes."""
    stems = {k[2:]: k for k in known if k.startswith("--")}
    stem = option.lstrip("-")
    prefixed = sorted(k for k in stems if stem and k.startswith(stem))
    if len(prefixed) == 1:
        return stems[prefixed[0]]
    match = difflib.get_close_matches(option.lstrip("-"), list(stems), n=1, cutoff=0.6)
    return stems[match[0]] if match else None


def owners_of(option: str, ctx: _click.core.Context) -> tuple[str, ...]:
    """The other commands of the app that take ``option``."""
    commands = getattr(ctx.parent.command, "commands", {}) if ctx.parent is not None else {}
    found = []
    for name, command in sorted(commands.items()):
        if name != ctx.info_name and option in option_arity(command.params):
            found.append(name)
    return tuple(found)


def one_line(message: str) -> None:
    from scalescope.cli.common import fail

    fail(message)


class CheckedCommand(TyperCommand):
    """A typer command that refuses unknown options in front of its script, in one line, and
    hands everything after the script to it untouched (a ``--`` there included)."""

    def parse_args(self, ctx: _click.core.Context, args: list[str]) -> list[str]:
        arity = option_arity(self.get_params(ctx))
        found = scan(args, arity, passthrough=bool(ctx.allow_extra_args))
        head, tail = args[: found.head_end], args[found.head_end :]
        if found.unknown is not None and "--help" not in head:
            owners = owners_of(found.unknown, ctx)
            unknown = Unknown(found.unknown, closest(found.unknown, arity), owners)
            one_line(unknown.message(ctx.info_name or self.name or ""))
        try:
            super().parse_args(ctx, head)
        except click_errors.NoArgsIsHelpError:
            raise
        except click_errors.UsageError as exc:
            one_line(f"{exc.format_message()} (see scalescope {ctx.info_name} --help)")
            raise typer.Exit(2) from exc
        ctx.args = [*ctx.args, *tail]
        return ctx.args
