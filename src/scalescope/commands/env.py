"""`scalescope env`: this machine's software build and hardware facts, checked for the traps
that decide speed, printed and written as JSON."""

from __future__ import annotations

from scalescope.commands.common import plain_console
from scalescope.commands.options.reading import EnvCommand


def env(command: EnvCommand) -> None:
    """Collect the facts, check them, print them and write the JSON asked for."""
    from scalescope.diagnose.env_checks import check_environment
    from scalescope.launch.facts import collect_environment
    from scalescope.report.views.env import env_json, render_env

    facts = collect_environment()
    warnings = check_environment(
        facts["software"], facts["hardware"], facts["threads"],
        nproc_per_node=command.nproc_per_node,
    )  # fmt: skip
    render_env(facts, warnings, plain_console())
    if command.json_file is not None:
        command.json_file.write_bytes(env_json(facts, warnings))
