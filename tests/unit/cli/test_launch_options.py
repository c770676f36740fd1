"""The launch options: declared once (launch/options/groups.py), given to each command by the groups
it takes, handed over inside one built options object; a bad value is one line naming its
flag."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar

import pytest
import typer
from typer.testing import CliRunner

from scalescope.cli import app
from scalescope.cli.params import options_command
from scalescope.launch.options.fields import argument, group, option
from scalescope.launch.options.groups import (
    GROUPS,
    OUTPUT,
    PLACEMENT,
    RECORDING,
    RENDEZVOUS,
    LaunchConfig,
)


def flags_of(*groups: str, skip: tuple[str, ...] = ()) -> set[str]:
    found = set()
    for name in groups:
        part, names = GROUPS[name]
        part_cls = type(getattr(LaunchConfig(), part))
        found |= {f.metadata["flags"][0] for f in fields(part_cls) if f.name in names}
        found -= {f.metadata["flags"][0] for f in fields(part_cls) if f.name in skip}
    return found


def command_flags(name: str) -> set[str]:
    command = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
    panels = {RENDEZVOUS, PLACEMENT, RECORDING, OUTPUT}
    return {p.opts[0] for p in command.params if getattr(p, "rich_help_panel", None) in panels}


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("run", flags_of(*GROUPS)),
        ("bench", flags_of(*GROUPS)),
        (
            "comm",
            flags_of("rendezvous", "nodes", "placement", "recording", skip=("no_probe", "record")),
        ),
        ("scale", flags_of("rendezvous", "nodes", "placement", skip=("nnodes",))),
        ("suite", flags_of("rendezvous", "placement", skip=("cpu_list",))),
        ("tune", flags_of("rendezvous", "placement")),
    ],
)
def test_each_command_takes_its_groups(command: str, expected: set[str]) -> None:
    assert len(expected) > 5 and command_flags(command) == expected


@dataclass(frozen=True, kw_only=True)
class Toy:
    launch_groups: ClassVar[tuple[str, ...]] = ("rendezvous", "placement")
    launch_skip: ClassVar[tuple[str, ...]] = ("cpu_list",)

    script: str = argument()
    """A script."""
    steps: int = option("--steps", default=3)
    """Steps."""
    args: tuple[str, ...] = ()
    launch: LaunchConfig = group(LaunchConfig)


def toy(passthrough: bool = True) -> tuple[typer.Typer, list[Toy]]:
    seen: list[Toy] = []
    toy_app = typer.Typer()
    settings = {"allow_extra_args": True, "ignore_unknown_options": True} if passthrough else {}

    @toy_app.command(context_settings=settings)
    @options_command(Toy)
    def go(options: Toy) -> None:
        seen.append(options)

    return toy_app, seen


def invoke(toy_app: typer.Typer, *args: str) -> Any:
    return CliRunner().invoke(toy_app, list(args))


def test_given_and_default_options_reach_the_command_as_one_object() -> None:
    toy_app, seen = toy()
    done = invoke(toy_app, "--master-port", "29511", "--bind-to", "core", "--steps", "5",
                  "t[1].py", "--lr", "1")  # fmt: skip
    assert done.exit_code == 0, done.output
    (got,) = seen
    assert (got.script, got.steps, got.args) == ("t[1].py", 5, ("--lr", "1"))
    assert got.launch.rendezvous.master_port == 29511 and got.launch.mapping.bind_to == "core"
    assert got.launch.recording == LaunchConfig().recording
    assert got.launch.rendezvous.nnodes == 1 and got.launch.mapping.cpu_list is None


@pytest.mark.parametrize("flag", ["--cpu-list", "--nnodes", "--run-dir"])
def test_an_option_outside_the_commands_groups_is_refused(flag: str) -> None:
    toy_app, seen = toy(passthrough=False)
    done = invoke(toy_app, flag, "1", "t.py")
    assert done.exit_code == 2 and seen == []
    assert flag in done.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--master-port", "70000"], "--master-port must be in 1..65535, got 70000"),
        (["--bind-to", "rack"], "--bind-to must be domain or core, got 'rack'"),
        (["--numa-nodes", "a,b"], "--numa-nodes takes numbers like 0,1, got 'a,b'"),
    ],
)
def test_a_bad_value_is_one_line_naming_its_flag(args: list[str], message: str) -> None:
    toy_app, seen = toy()
    done = invoke(toy_app, *args, "t.py")
    assert done.exit_code == 2 and seen == []
    assert done.output.strip() == f"error: {message}"


def test_a_bad_record_level_is_one_line() -> None:
    done = CliRunner().invoke(app, ["run", "--record", "partial", "t.py"])
    assert done.exit_code == 2
    assert done.output.strip() == "error: --record must be full or summary, got 'partial'"


def test_help_shows_the_groups_in_their_own_panels() -> None:
    done = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "120"})
    assert done.exit_code == 0
    for panel in ("Rendezvous", "Placement", "Recording", "Output"):
        assert f"─ {panel} ─" in done.output
    assert "Ranks to start on this node (default: 1)." in done.output
    assert "Seconds without a finished step or collective on any rank" in done.output


def test_no_node_files_reaches_the_run_spec(tmp_path) -> None:
    from scalescope.api.launching import launch_spec
    from scalescope.launch.options.groups import Recording

    script = tmp_path / "t.py"
    script.write_text("")
    off = LaunchConfig(recording=Recording(no_node_files=True))
    specs = [launch_spec(c, None, target=str(script)) for c in (LaunchConfig(), off)]
    assert [s.node_files for s in specs] == [True, False]
