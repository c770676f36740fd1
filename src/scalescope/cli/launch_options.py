"""The launch options that run, bench, comm, scale, suite and tune share, declared once.

``@with_launch_options(...)`` adds the chosen groups to a command's signature (typer reads
``__signature__``), shows them under their own panel in ``--help`` and hands the command one
``launch``, a typed ``commands.run.LaunchFlags`` holding every launch option: the ones the
command takes, as given, and the others at their defaults (tune never takes ``--nnodes``: its
trials run on this node). A command's own option of the same name (tune's ``--run-dir``, the
study; comm's ``--html``) stays its own argument, and ``launch`` holds the launch option's
default in its place.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from typer.models import OptionInfo

RENDEZVOUS, PLACEMENT, RECORDING, OUTPUT = "Rendezvous", "Placement", "Recording", "Output"


def _option(default: Any, flag: str, help: str, panel: str, **kw: Any) -> OptionInfo:
    return typer.Option(default, flag, help=help, rich_help_panel=panel, **kw)


GROUPS: dict[str, dict[str, tuple[Any, OptionInfo]]] = {
    "rendezvous": {
        "master_addr": (str | None, _option(
            None, "--master-addr", "Address of rank 0 (default: 127.0.0.1; under srun/mpirun "
            "found from the launcher).", RENDEZVOUS)),
        "master_port": (int | None, _option(
            None, "--master-port", "Port of the rendezvous (default: free; under srun/mpirun "
            "derived from the job id).", RENDEZVOUS)),
    },
    "nodes": {
        "nnodes": (int, _option(1, "--nnodes", "Nodes in the job (torchrun-style).", RENDEZVOUS,
                                min=1)),
        "node_rank": (int, _option(0, "--node-rank", "This node's index.", RENDEZVOUS, min=0)),
        "rdzv_endpoint": (str | None, _option(
            None, "--rdzv-endpoint", "HOST[:PORT] of the rendezvous.", RENDEZVOUS)),
        "rdzv_backend": (str, _option("c10d", "--rdzv-backend", "c10d or static.", RENDEZVOUS)),
        "rdzv_id": (str, _option("", "--rdzv-id", "Job id shared by all nodes.", RENDEZVOUS)),
        "local_addr": (str | None, _option(
            None, "--local-addr", "This node's address for the others.", RENDEZVOUS)),
    },
    "placement": {
        "map_by": (str, _option("numa", "--map-by",
                                "Domains to spread ranks over: node, socket, numa, core.",
                                PLACEMENT)),
        "threads_per_rank": (int | None, _option(
            None, "--threads-per-rank", "Threads per rank (default: its cores).", PLACEMENT,
            min=1)),
        "numa_nodes": (str | None, _option(
            None, "--numa-nodes", "Use only these NUMA nodes, e.g. 0,1.", PLACEMENT)),
        "cpu_list": (list[str] | None, _option(
            None, "--cpu-list", "Cpus of one rank (repeat per rank), e.g. 0-11.", PLACEMENT)),
        "oversubscribe": (bool, _option(
            False, "--oversubscribe", "Allow more threads than cores.", PLACEMENT)),
        "no_bind": (bool, _option(False, "--no-bind", "Do not bind ranks to cpus.", PLACEMENT)),
        "bind_to": (str, _option(
            "domain", "--bind-to", "domain: the rank's NUMA node/socket; core: its own cores.",
            PLACEMENT)),
        "allocator": (str, _option(
            "default", "--allocator", "tcmalloc, jemalloc or default.", PLACEMENT)),
    },
    "recording": {
        "dry_run": (bool, _option(
            False, "--dry-run", "Print the placement plan and start nothing.", RECORDING)),
        "report_bindings": (bool, _option(
            False, "--report-bindings", "Each rank prints its binding.", RECORDING)),
        "run_dir": (Path | None, _option(
            None, "--run-dir", "Where to record (default: scalescope_runs/…).", RECORDING)),
        "no_probe": (bool, _option(
            False, "--no-probe", "Run without instrumentation (for A/B).", RECORDING)),
    },
    "hang": {
        "hang_after": (float | None, _option(
            None, "--hang-after", "Seconds without a finished step or collective on any rank "
            "before a hang is reported (default: 10 typical steps, at least 30).", RECORDING)),
        "hang_action": (str, _option(
            "report", "--hang-action", "On a hang: report (stacks, hang.json; stop nothing) or "
            "kill (then stop the ranks).", RECORDING)),
    },
    "report": {
        "no_report": (bool, _option(
            False, "--no-report", "Do not print the report at the end.", RECORDING)),
        "html": (Path | None, _option(
            None, "--html", "Also write the HTML dashboard of the run here.", RECORDING)),
    },
    "output": {
        "live": (bool, _option(
            False, "--live", "Show the live view (scalescope top) here while it trains; the "
            "ranks' output goes to RUN_DIR/logs, its last lines below the view.", OUTPUT)),
        "label_output": (bool, _option(
            False, "--label-output", "Prefix each line of the ranks' output with \\[rank N] "
            "(whole lines, never cut or glued).", OUTPUT)),
        "ranks_output": (str | None, _option(
            None, "--ranks-output", "Only these ranks' output on the terminal, e.g. 0; every "
            "rank's is kept in RUN_DIR/logs.", OUTPUT)),
    },
}  # fmt: skip
"""Each launch option by group: its type and its typer option."""

ALL_GROUPS = tuple(GROUPS)
DEFAULTS = {name: option.default for g in GROUPS.values() for name, (_, option) in g.items()}


def with_launch_options(
    *groups: str, skip: tuple[str, ...] = ()
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add the options of ``groups`` (but not ``skip``) to the command; it gets them, and
    the defaults of all the others, as its ``launch`` keyword (one ``LaunchFlags``)."""
    taken = {n: t for g in groups for n, t in GROUPS[g].items() if n not in skip}

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(command, eval_str=True)
        own = [p.replace(kind=p.KEYWORD_ONLY) for p in signature.parameters.values()]
        own = [p for p in own if p.name != "launch"]
        added = [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=t)
            for name, (t, option) in taken.items()
        ]

        @functools.wraps(command)
        def wrapper(**given: Any) -> Any:
            from scalescope.commands.run import LaunchFlags

            flags = DEFAULTS | {name: given.pop(name) for name in taken}
            return command(**given, launch=LaunchFlags(**flags))

        del wrapper.__wrapped__
        parameters = [*own, *added]
        wrapper.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
        return wrapper

    return decorate
