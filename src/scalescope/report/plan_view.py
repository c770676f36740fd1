"""Render the placement plan (--dry-run): rank → host, local rank, cores, NUMA node, threads."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from scalescope.launch.session import PlanView
from scalescope.probe.binding import PLACEMENTS_ENV


def render_plan(view: PlanView, console: Console) -> None:
    title = (
        f"Plan on {view.hostname}: ranks from {view.first_rank} of {view.world_size} "
        f"({view.source}), topology from {view.plan.topology_source}"
    )
    table = Table(title=Text(title), title_justify="left")
    for col in ("rank", "host", "local rank", "cpus", "NUMA node", "threads", "environment"):
        table.add_column(col, justify="right" if col in ("rank", "threads") else "left")
    for row in view.plan.as_json() or []:
        env = " ".join(f"{k}={v}" for k, v in row["env"].items())
        numa = "several" if row["numa_node"] is None else str(row["numa_node"])
        table.add_row(
            str(view.first_rank + row["local_rank"]),
            Text(view.hostname),
            str(row["local_rank"]),
            row["cpulist"],
            numa,
            str(row["threads"]),
            Text(env),
        )
    if view.plan.placements is None:
        console.print(Text("No binding (--no-bind): ranks float over all cpus."))
    else:
        console.print(table)
    shared = {k: v for k, v in view.plan.env.items() if k != PLACEMENTS_ENV}
    for key, value in shared.items():
        console.print(Text(f"every rank: {key}={value}"))
