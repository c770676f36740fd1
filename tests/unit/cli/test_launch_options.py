"""The shared launch options: declared once, added to each command, handed over as one typed
``LaunchFlags``."""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from scalescope.cli import app
from scalescope.cli.launch_options import (
    DEFAULTS,
    GROUPS,
    OUTPUT,
    PLACEMENT,
    RECORDING,
    RENDEZVOUS,
    with_launch_options,
)
from scalescope.commands.run import LaunchFlags

FLAGS = {name: option.param_decls[0] for g in GROUPS.values() for name, (_, option) in g.items()}


def flags_of(*groups: str, skip: tuple[str, ...] = ()) -> set[str]:
    return {FLAGS[n] for g in groups for n in GROUPS[g] if n not in skip}


def command_flags(name: str) -> set[str]:
    command = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
    panels = {RENDEZVOUS, PLACEMENT, RECORDING, OUTPUT}
    return {p.opts[0] for p in command.params if getattr(p, "rich_help_panel", None) in panels}


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("run", flags_of(*GROUPS)),
        ("bench", flags_of(*GROUPS)),
        ("comm", flags_of("rendezvous", "nodes", "placement", "recording", skip=("no_probe",))),
        ("scale", flags_of("rendezvous", "nodes", "placement", skip=("nnodes",))),
        ("suite", flags_of("rendezvous", "placement", skip=("cpu_list",))),
        ("tune", flags_of("rendezvous", "placement")),
    ],
)
def test_each_command_takes_its_groups(command: str, expected: set[str]) -> None:
    assert command_flags(command) == expected


def toy() -> tuple[typer.Typer, list[dict[str, Any]]]:
    seen: list[dict[str, Any]] = []
    toy_app = typer.Typer()

    @toy_app.command()
    @with_launch_options("rendezvous", "placement", skip=("cpu_list",))
    def go(
        script: str = typer.Argument(...),
        steps: int = typer.Option(3, "--steps"),
        *,
        launch: LaunchFlags,
    ) -> None:
        seen.append({"script": script, "steps": steps, **asdict(launch)})

    return toy_app, seen


def test_given_and_default_options_reach_the_command_as_one_object() -> None:
    toy_app, seen = toy()
    done = CliRunner().invoke(
        toy_app, ["t[1].py", "--steps", "5", "--master-port", "29511", "--bind-to", "core"]
    )
    assert done.exit_code == 0, done.output
    (got,) = seen
    assert got["script"] == "t[1].py" and got["steps"] == 5
    assert got["master_port"] == 29511 and got["bind_to"] == "core"
    untouched = set(DEFAULTS) - {"master_port", "bind_to"}
    assert {n: got[n] for n in untouched} == {n: DEFAULTS[n] for n in untouched}
    assert got["run_dir"] is None and got["nnodes"] == 1


def test_every_launch_option_is_a_field_of_launch_flags_with_its_default() -> None:
    """The typer declarations and the typed flags name the same options, with one default."""
    declared = {f.name: f.default for f in fields(LaunchFlags)}
    assert declared == DEFAULTS


@pytest.mark.parametrize("flag", ["--cpu-list", "--nnodes", "--run-dir"])
def test_an_option_outside_the_commands_groups_is_refused(flag: str) -> None:
    toy_app, seen = toy()
    done = CliRunner().invoke(toy_app, ["t.py", flag, "1"])
    assert done.exit_code == 2 and seen == []
    assert flag in done.output


def test_help_shows_the_groups_in_their_own_panels() -> None:
    done = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "120"})
    assert done.exit_code == 0
    for panel in ("Rendezvous", "Placement", "Recording"):
        assert f"─ {panel} ─" in done.output
    assert "Ranks to start on this node (default: 1)." in done.output
