"""Typer parameters generated from a command's options dataclass (commands/options/): each
field declared with a flag or as an argument becomes one parameter, its docstring the help;
a group field (the launch options) is expanded into the groups the command takes
(``launch_groups`` of the class, less ``launch_skip``). The command gets one built options
object; a value its ``__post_init__`` refuses is ``error: MESSAGE`` with exit code 2.
"""

from __future__ import annotations

import ast
import functools
import inspect
import sys
import textwrap
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import MISSING, Field, dataclass, fields
from typing import Any

import typer

from scalescope.cli.common import fail
from scalescope.commands.options.shared import ARGUMENT, BOUNDS, FLAGS, GROUP, PANEL

PASSED_ON = "args"
"""The field that gets the arguments after the script (commands that pass them on)."""


@dataclass(frozen=True)
class Param:
    """One typer parameter: where its value goes (the group's field, or None) and its field."""

    name: str
    group: str | None
    field: Field[Any]
    owner: type


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """The docstrings under the fields a class declares itself, as one line each."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    body = ast.parse(source).body[0].body  # type: ignore[attr-defined]
    docs = {}
    for node, after in zip(body, body[1:], strict=False):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
            docs[node.target.id] = " ".join(str(after.value.value).split())
    return docs


def declaring(cls: type, name: str) -> type:
    return next(c for c in cls.__mro__ if name in getattr(c, "__annotations__", {}))


def field_type(cls: type, f: Field[Any]) -> Any:
    """The field's type, as typer takes it: ``tuple[X, ...]`` given as ``list[X]``."""
    owner = declaring(cls, f.name)
    hint = f.type
    if isinstance(hint, str):
        hint = eval(hint, vars(sys.modules[owner.__module__]))  # noqa: S307  our own source
    return as_list(hint)


def as_list(hint: Any) -> Any:
    if typing.get_origin(hint) is tuple:
        return list[typing.get_args(hint)[0]]  # type: ignore[misc]
    if typing.get_origin(hint) in (types.UnionType, typing.Union):
        return functools.reduce(lambda a, b: a | b, map(as_list, typing.get_args(hint)))
    return hint


def params_of(cls: type) -> Iterator[Param]:
    """The parameters of ``cls`` in field order, its group fields expanded."""
    for f in fields(cls):
        if f.metadata.get(GROUP):
            yield from group_params(cls, f)
        elif ARGUMENT in f.metadata or FLAGS in f.metadata:
            yield Param(f.name, None, f, cls)


def group_params(cls: type, holder: Field[Any]) -> Iterator[Param]:
    config = field_type(cls, holder)
    taken = getattr(config, "GROUPS", {})
    skip = getattr(cls, "launch_skip", ())
    for name in getattr(cls, "launch_groups", ()):
        part, names = taken[name]
        part_cls = field_type(config, next(f for f in fields(config) if f.name == part))
        for f in fields(part_cls):
            if f.name in names and f.name not in skip:
                yield Param(f"{holder.name}__{part}__{f.name}", holder.name, f, part_cls)


def typer_default(p: Param) -> Any:
    f, meta = p.field, p.field.metadata
    default = ... if f.default is MISSING and f.default_factory is MISSING else f.default
    help_text = field_docs(declaring(p.owner, f.name)).get(f.name)
    if meta.get(ARGUMENT):
        return typer.Argument(default, help=help_text, **meta[BOUNDS])
    return typer.Option(
        default, *meta[FLAGS], help=help_text, rich_help_panel=meta[PANEL], **meta[BOUNDS]
    )


def build(cls: type, params: list[Param], given: dict[str, Any], own: dict[str, Any]) -> Any:
    """The options object from the parsed values (and ``own``, set by the command line itself);
    tuples where the field holds a tuple."""
    parts: dict[str, dict[str, dict[str, Any]]] = {}
    for p in params:
        value = given[p.name]
        if isinstance(value, list) and "tuple" in str(p.field.type):
            value = tuple(value)
        if p.group is None:
            own[p.field.name] = value
        else:
            part = p.name.split("__")[1]
            parts.setdefault(p.group, {}).setdefault(part, {})[p.field.name] = value
    for holder, values in parts.items():
        config = field_type(cls, next(f for f in fields(cls) if f.name == holder))
        built = {
            part: field_type(config, next(f for f in fields(config) if f.name == part))(**kw)
            for part, kw in values.items()
        }
        own[holder] = config(**built)
    return cls(**own)


def options_command(cls: type) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give the command the parameters of ``cls``; it is called with one ``cls`` object (and
    the arguments after the script in its ``args`` field, where it has one)."""
    params = list(params_of(cls))
    passes_on = PASSED_ON in {f.name for f in fields(cls)}

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(ctx: typer.Context, **given: Any) -> Any:
            rest = {PASSED_ON: tuple(ctx.args)} if passes_on else {}
            try:
                options = build(cls, params, given, rest)
            except ValueError as exc:
                fail(str(exc))
                raise
            return command(options)

        ctx_param = inspect.Parameter(
            "ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context
        )
        added = [
            inspect.Parameter(
                p.name,
                inspect.Parameter.KEYWORD_ONLY,
                default=typer_default(p),
                annotation=field_type(p.owner, p.field),
            )
            for p in params
        ]
        wrapper.__name__, wrapper.__doc__ = command.__name__, command.__doc__
        wrapper.__signature__ = inspect.Signature([ctx_param, *added])  # type: ignore[attr-defined]
        return wrapper

    return decorate
