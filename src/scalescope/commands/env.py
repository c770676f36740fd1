"""`scalescope env`: this machine's software build and hardware facts, checked for the traps
that decide speed, printed and written as JSON."""

from __future__ import annotations

from scalescope.commands.common import plain_console
from scalescope.commands.options.reading import EnvCommand


def env(command: EnvCommand) -> None:
    """Collect the facts, check them, print them and write the JSON asked for."""
    from scalescope.diagnose.env_checks import check_environment
    from scalescope.launch.machine.facts import collect_environment
    from scalescope.predict.catalogue import gpu_peaks
    from scalescope.report.media.terminal import render_document
    from scalescope.report.renderers import render, write
    from scalescope.report.subjects import EnvReport

    facts = collect_environment()
    warnings = check_environment(
        facts["software"], facts["hardware"], facts["threads"],
        nproc_per_node=command.nproc_per_node,
    )  # fmt: skip
    peaks = tuple(gpu_peaks(gpu.get("name")) for gpu in facts["hardware"].get("gpus") or [])
    report = EnvReport(facts=facts, warnings=warnings, gpu_peaks=peaks)
    render_document(render(report, "terminal"), plain_console())
    if command.json_file is not None:
        write(report, "json", command.json_file)
