"""The run report's collectives: by op, by mesh dimension, by message size, per step, per
FSDP unit, and those that never completed (report/views/run.py places the section)."""

from __future__ import annotations

from scalescope.analyze import CollectiveAnalysis, RunAnalysis
from scalescope.analyze.comm.collectives import UnitTraffic
from scalescope.events.units import fmt_bytes, fmt_bytes_exact, number_ranges
from scalescope.report.document import Block, Column, Line, Section, Table
from scalescope.report.formatting import NA, fmt, fmt_calls, plural
from scalescope.report.views.rank_summary import limited_table


def no_data(a: RunAnalysis, what: str) -> Line:
    if not a.probe:
        return Line(f"No {what}: the run was launched with the probe off, so none was recorded.")
    return Line(f"No {what} were recorded (see problems above, if any).")


OP_COLUMNS = (
    Column("op", align="left"),
    Column("tag", align="left"),
    Column("ranks"),
    Column("calls"),
    Column("total", "ms"),
    Column("bytes", align="left"),
    Column("incomplete calls"),
)


def op_table(c: CollectiveAnalysis) -> Table:
    """One row per op and tag, and per dimension where some group is not the world's."""
    by_dim = any(o.dim not in ("", "world") for o in c.ops)
    rows = tuple(
        (
            o.op,
            o.tag or NA,
            *((o.dim or NA,) if by_dim else ()),
            str(o.num_ranks),
            fmt_calls(o.calls_min, o.calls_max),
            f"{o.total_ms_per_rank:,.2f}",
            fmt_bytes(o.nbytes_per_rank),
            str(o.incomplete_calls),
        )
        for o in c.ops
    )
    columns = (*OP_COLUMNS[:2], DIM_COLUMN, *OP_COLUMNS[2:]) if by_dim else OP_COLUMNS
    return Table("Collectives per op (per rank)", columns, rows)


DIM_COLUMN = Column("dimension", align="left")


SIZE_COLUMNS = (
    Column("op", align="left", no_wrap=True),
    Column("size", "B", byte_size=True),
    Column("count"),
    Column("avg", "µs"),
    Column("min", "µs"),
    Column("max", "µs"),
    Column("total", "ms"),
    Column("algbw", "GB/s"),
    Column("busbw", "GB/s"),
)


def size_table(c: CollectiveAnalysis) -> Table:
    """The nccl-tests columns: one row per op and message size (and group size, where some
    group is smaller than the world: the n of its bus factor), count and total per rank."""
    by_group = any(z.group_ranks not in (0, c.world_size) for z in c.sizes)
    rows, values = [], []
    for z in c.sizes:
        times = (z.time_avg_us, z.time_min_us, z.time_max_us)
        calls = fmt_calls(z.calls_min, z.calls_max)
        n = (str(z.group_ranks),) if by_group else ()
        rows.append(
            (
                z.op,
                f"{z.nbytes:,}",
                *n,
                calls,
                *(f"{t:,.1f}" for t in times),
                f"{z.total_ms_per_rank:,.2f}",
                fmt(z.algbw_gbps, ".2f"),
                fmt(z.busbw_gbps, ".2f"),
            )
        )
        count = z.calls_min if z.calls_min == z.calls_max else calls
        values.append(
            (z.op, z.nbytes, *((z.group_ranks,) if by_group else ()), count, *times,
             z.total_ms_per_rank, z.algbw_gbps, z.busbw_gbps)
        )  # fmt: skip
    columns = (*SIZE_COLUMNS[:2], Column("n"), *SIZE_COLUMNS[2:]) if by_group else SIZE_COLUMNS
    n_ranks = "n = the group's ranks" if by_group else f"n = {c.world_size} ranks"
    return Table(
        f"Collectives by message size (nccl-tests columns, {n_ranks})",
        columns,
        tuple(rows),
        tuple(values),
        html_id="sizes",
        caption="count and total per rank; time per call (avg/min/max) from issue to "
        "completion, over all ranks; GB = 1e9 B; algbw = size / avg time; "
        "busbw = algbw x nccl-tests factor",
    )


def _per_step_table(c: CollectiveAnalysis) -> Table:
    cols = (Column("tag", align="left"), Column("bytes/step", align="left"), Column("calls/step"))
    rows = tuple(
        (t.tag or NA, fmt_bytes_exact(t.nbytes_per_step), f"{t.calls_per_step:,.2f}")
        for t in c.per_step
    )
    return Table("Traffic per measured step (per rank)", cols, rows)


UNIT_COLUMNS = (
    Column("unit", align="left"),
    Column("all-gathers"),
    Column("gathered"),
    Column("all-gather (ms)"),
    Column("reduce-scatters"),
    Column("reduced"),
    Column("reduce-scatter (ms)"),
)


def _units_table(units: tuple[UnitTraffic, ...]) -> Table:
    rows = tuple(
        (
            u.unit,
            f"{u.gathers_per_step:,.2f}",
            fmt_bytes(u.gathered_bytes_per_step),
            f"{u.gather_ms_per_step:,.2f}",
            f"{u.reductions_per_step:,.2f}",
            fmt_bytes(u.reduced_bytes_per_step),
            f"{u.reduce_ms_per_step:,.2f}",
        )
        for u in units
    )
    return Table(
        "FSDP units per measured step (per rank)",
        UNIT_COLUMNS,
        rows,
        caption="per measured step and rank; a unit is a module given to fully_shard (root: "
        "the outermost); all-gather: its parameters unsharded (in forward, and again in "
        "backward when it reshards after forward); reduce-scatter: its gradients; time from "
        "issue to completion",
    )


INCOMPLETE_COLUMNS = tuple(
    Column(name, align="left") for name in ("rank", "op", "tag", "calls", "first seq", "step")
)


def _incomplete_table(c: CollectiveAnalysis) -> Table:
    rows = tuple(
        (
            str(i.rank),
            i.op,
            i.tag or NA,
            str(i.calls),
            NA if i.first_seq < 0 else str(i.first_seq),
            str(i.first_step),
        )
        for i in c.incomplete
    )
    calls = plural(c.incomplete_calls, "call")
    title = f"Collectives that never completed ({calls}, not in the times)"
    return limited_table(title, INCOMPLETE_COLUMNS, rows)


DIM_COLUMNS = (
    Column("dimension", align="left"),
    Column("groups"),
    Column("ranks each"),
    Column("calls"),
    Column("time", "ms/rank"),
    Column("waiting", "ms/rank"),
    Column("transfer", "ms/rank"),
    Column("bytes", "MB/rank"),
    Column("known by", align="left"),
)
DIM_MEANING = (
    "measured steps; a dimension is the DeviceMesh's name for its groups, else the world "
    "(every rank) or the distance between members (stride N); time: issue to completion; "
    "waiting: for the group's last rank to arrive; transfer: from then to completion (n/a: "
    "no instance matched across ranks)"
)


def _dims_table(a: RunAnalysis) -> Table | None:
    """Only where some group is not the world's: a data-parallel run's report is unchanged."""
    if all(d.dim == "world" for d in a.dims):
        return None
    waits = {w.dim: w for w in a.cross_rank.dims} if a.cross_rank else {}
    values = tuple(
        (d.dim, d.groups, d.ranks_per_group, d.calls, d.ms_per_rank,
         waits[d.dim].wait_ms_per_rank if d.dim in waits else None,
         waits[d.dim].transfer_ms_per_rank if d.dim in waits else None,
         d.bytes_per_rank / 1e6, "its DeviceMesh" if d.named else "its members")
        for d in a.dims
    )  # fmt: skip
    rows = tuple(
        (v[0], str(v[1]), str(v[2]), f"{v[3]:,}", f"{v[4]:,.1f}",
         *(NA if x is None else f"{x:,.1f}" for x in v[5:7]), f"{v[7]:,.1f}", v[8])
        for v in values
    )  # fmt: skip
    return Table("Collectives by dimension", DIM_COLUMNS, rows, values=values, caption=DIM_MEANING)


def full_windows(a: RunAnalysis) -> tuple[int, ...]:
    """The steps recorded in full on a run recorded as summaries; () in full."""
    return a.collectives.windows if a.collectives is not None else ()


def windows_note(c: CollectiveAnalysis) -> Line | None:
    """Which steps' calls the tables count, on a run recorded as summaries; None in full."""
    if not c.windows:
        return None
    return Line(
        f"Calls of steps {number_ranges(c.windows)} only, the windows recorded in full; "
        f"{plural(c.summarised_steps, 'other step')} recorded as summaries (--record summary; "
        "--record full writes every call).",
        style="note",
    )


def collectives_section(a: RunAnalysis) -> Section:
    c = a.collectives
    if c is None:
        return Section("Collectives", (no_data(a, "collectives"),))
    note = windows_note(c)
    blocks: list[Block] = [*((note,) if note else ()), op_table(c)]
    dims = _dims_table(a)
    if dims is not None:
        blocks.append(dims)
    if c.sizes:
        blocks.append(size_table(c))
    if c.per_step:
        blocks.append(_per_step_table(c))
    units = c.units
    if units:
        blocks.append(_units_table(units))
    if c.incomplete:
        blocks.append(_incomplete_table(c))
    return Section("Collectives", tuple(blocks))
