"""The placement plan (--dry-run): rank → host, local rank, cores, NUMA node, threads."""

from __future__ import annotations

from scalescope.launch.run.session import PlanView
from scalescope.probe.binding import PLACEMENTS_ENV
from scalescope.report.document import Block, Column, Document, Line, Table

PLAN_COLUMNS = tuple(
    Column(name, align="right" if name in ("rank", "threads") else "left")
    for name in ("rank", "host", "local rank", "cpus", "NUMA node", "threads", "environment")
)


def _table(view: PlanView) -> Table:
    title = (
        f"Plan on {view.hostname}: ranks from {view.first_rank} of {view.world_size} "
        f"({view.source}), topology from {view.plan.topology_source}"
    )
    rows = tuple(
        (
            str(view.first_rank + row["local_rank"]),
            view.hostname,
            str(row["local_rank"]),
            row["cpulist"],
            "several" if row["numa_node"] is None else str(row["numa_node"]),
            str(row["threads"]),
            " ".join(f"{k}={v}" for k, v in row["env"].items()),
        )
        for row in view.plan.as_json() or []
    )
    return Table(title, PLAN_COLUMNS, rows)


def plan_document(view: PlanView) -> Document:
    """The table of placements (or the note that there are none), then the environment
    every rank shares."""
    blocks: list[Block] = [
        Line("No binding (--no-bind): ranks float over all cpus.")
        if view.plan.placements is None
        else _table(view)
    ]
    shared = {k: v for k, v in view.plan.env.items() if k != PLACEMENTS_ENV}
    blocks += [Line(f"every rank: {key}={value}") for key, value in shared.items()]
    return Document(f"scalescope plan on {view.hostname}", tuple(blocks))
