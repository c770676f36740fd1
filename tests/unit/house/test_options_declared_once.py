"""Each command-line option is declared in one place: every flag of every command of the app
(read from click's command tree) is a string literal of exactly one declaring call in the
source (``option``, ``Flag``, ``typer.Option``, ...); a command that takes a shared option
gives it its own default and help, never its own flag."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path
from typing import Any

import typer

from scalescope.cli import app

SRC = Path(__file__).parents[3] / "src" / "scalescope"
DECLARING = {"option", "Flag", "Option", "Argument"}
"""The calls that declare an option's names; a flag's name passed anywhere else (an error
message, ``int_list(text, "--nodes")``) names it, and does not declare it."""


def commands(group: Any, prefix: str = "") -> dict[str, Any]:
    """Every command of the tree by its full name (``data pack``); typer's click may be its
    own copy, so groups are known by their ``commands``."""
    found: dict[str, Any] = {}
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            found |= commands(command, f"{prefix}{name} ")
        else:
            found[f"{prefix}{name}"] = command
    return found


def app_flags() -> dict[str, set[str]]:
    """Each flag of the app, and the commands that take it."""
    taken: dict[str, set[str]] = {}
    for name, command in commands(typer.main.get_command(app)).items():
        for param in command.params:
            if param.param_type_name == "option":
                for flag in (*param.opts, *param.secondary_opts):
                    taken.setdefault(flag, set()).add(name)
    return taken


def declarations(source: str) -> Counter[str]:
    """How many declaring calls of ``source`` give each flag (``"--x/--no-x"`` gives both)."""
    counts: Counter[str] = Counter()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        callee = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
        if callee not in DECLARING and not (callee.isupper() and node.args):
            continue
        literals = {
            flag
            for arg in ast.walk(node)
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str)
            for flag in arg.value.split("/")
            if flag.startswith("-") and " " not in flag
        }
        counts.update(literals)
    return counts


def source_declarations() -> Counter[str]:
    counts: Counter[str] = Counter()
    for path in SRC.rglob("*.py"):
        counts += declarations(path.read_text(encoding="utf-8"))
    return counts


def test_every_flag_is_declared_exactly_once() -> None:
    flags = app_flags()
    counts = source_declarations()
    assert len(flags) > 80, sorted(flags)
    wrong = {flag: counts[flag] for flag in flags if flag != "--help" and counts[flag] != 1}
    assert wrong == {}


def test_shared_flags_are_taken_by_several_commands() -> None:
    """The check reads the app: --json is one declaration that nine commands take."""
    flags = app_flags()
    assert flags["--json"] == {
        "analyze", "compare", "comm", "env", "project", "report", "suite", "tune", "whatif",
    }  # fmt: skip
    assert flags["--master-addr"] >= {"run", "bench", "comm", "scale", "suite", "tune"}


def test_the_check_sees_a_second_declaration() -> None:
    planted = """
import typer
from scalescope.launch.options.fields import Flag, option
JSON = Flag(("--json",))
def report(json_file=typer.Option(None, "--json", help="Also write the report as JSON.")): ...
x = option("--fsdp/--no-fsdp", default=False)
y = FSDP(False, off="--no-fsdp")
z = int_list(text, "--nodes")
raise ValueError("--json takes a path")
"""
    counts = declarations(planted)
    assert counts["--json"] == 2 and counts["--no-fsdp"] == 2 and counts["--fsdp"] == 1
    assert counts["--nodes"] == 0
