"""Per-rank tables that stay short at any number of ranks.

Up to ``RANK_ROWS_LIMIT`` ranks a report prints one row per rank, as it always did. Beyond,
it prints the ``WORST_SHOWN`` slowest and the ``BEST_SHOWN`` fastest ranks with their host
(slowest first, by ``RunAnalysis.slowest_first``) and the distribution over every rank
(min, p10, p50, p90, max: ``RunAnalysis.spreads``) with how many ranks are not shown; the
JSON report keeps every rank.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scalescope.analyze import RunAnalysis
from scalescope.analyze.rank_spread import PERCENTILES, RankOrder, Spread
from scalescope.report.document import Column, Style, Table
from scalescope.report.formatting import NA

RANK_ROWS_LIMIT = 16
"""Most ranks a report lists one row each; beyond, the worst, the best and the distribution."""
WORST_SHOWN = 5
BEST_SHOWN = 3
HOSTS_LISTED = 16
"""Most host names the header lists; beyond, the first and the last few."""
ALL_IN_JSON = "every rank is in the JSON report (--json)"


def limited_table(
    title: str,
    columns: tuple[Column, ...],
    rows: tuple,
    values: tuple | None = None,
    caption: str = "",
) -> Table:
    """The first ``RANK_ROWS_LIMIT`` rows, the caption saying how many more the JSON holds."""
    if len(rows) <= RANK_ROWS_LIMIT:
        return Table(title, columns, rows, values=values, caption=caption)
    more = f"{len(rows) - RANK_ROWS_LIMIT:,} more rows not shown; {ALL_IN_JSON}"
    return Table(
        title, columns, rows[:RANK_ROWS_LIMIT],
        values=values[:RANK_ROWS_LIMIT] if values is not None else None,
        caption=f"{caption}. {more}" if caption else more,
    )  # fmt: skip


@dataclass(frozen=True)
class ShownRanks:
    """The ranks a condensed table lists: the slowest first, then the fastest."""

    worst: tuple[int, ...]
    best: tuple[int, ...]
    total: int
    metric: str

    @property
    def ranks(self) -> tuple[int, ...]:
        return self.worst + self.best

    @property
    def hidden(self) -> int:
        return self.total - len(self.ranks)

    def title(self, what: str) -> str:
        return (
            f"{what}: the {len(self.worst)} slowest and {len(self.best)} fastest of "
            f"{self.total:,} ranks (by {self.metric})"
        )


def shown_ranks(order: RankOrder | None, all_ranks: Sequence[int]) -> ShownRanks:
    """The worst and best of ``order`` among ``all_ranks``; without an order, the first
    ranks."""
    if order is None:
        return ShownRanks(tuple(all_ranks[:WORST_SHOWN]), (), len(all_ranks), "rank")
    present = set(all_ranks)
    ranked = [r for r in order.ranks if r in present]
    worst = tuple(ranked[:WORST_SHOWN])
    best = tuple(r for r in ranked[WORST_SHOWN:][-BEST_SHOWN:])
    return ShownRanks(worst, best, len(all_ranks), order.metric)


def hosts_of(a: RunAnalysis) -> dict[int, str]:
    return {r.rank: r.hostname for r in a.ranks if r.hostname}


def condensed_rank_table(
    table: Table, row_ranks: Sequence[int], shown: ShownRanks, hosts: Mapping[int, str]
) -> Table:
    """``table`` (one row per rank, the rank in its first column) cut to the shown ranks,
    slowest first then fastest, with each rank's host after the rank; a rule between the
    slowest and the fastest."""
    index = {rank: i for i, rank in enumerate(row_ranks)}
    picked = [index[r] for r in shown.ranks if r in index]
    columns = (table.columns[0], Column("host", align="left"), *table.columns[1:])
    rows = tuple(
        (table.rows[i][0], hosts.get(row_ranks[i], NA), *table.rows[i][1:]) for i in picked
    )
    worst = sum(1 for r in shown.worst if r in index)
    groups = tuple(n for n in (worst, len(picked) - worst) if n)
    styles: tuple[Style, ...] | None = None
    if table.styles is not None:
        styles = tuple(table.styles[i] for i in picked)
    return Table(
        shown.title(table.title),
        columns,
        rows,
        groups=groups,
        styles=styles,
        caption=table.caption,
        html_id=table.html_id,
    )


@dataclass(frozen=True)
class RankMetric:
    """One number per rank, for the distribution table."""

    name: str
    unit: str
    spread: Spread | None
    """Over every rank (``RunAnalysis.spreads``)."""


SPREAD_COLUMNS = (Column("per rank", align="left"), *(Column(n) for n, _ in PERCENTILES))


def spread_table(metrics: Sequence[RankMetric], total: int, hidden: int) -> Table:
    """min, p10, p50, p90 and max of each metric over every rank, and how many ranks the
    table above leaves out."""
    rows, values = [], []
    for m in metrics:
        stats = None if m.spread is None else m.spread.values
        label = f"{m.name} ({m.unit})" if m.unit else m.name
        rows.append((label, *(NA if stats is None else f"{v:,.2f}" for v in stats or (0,) * 5)))
        values.append((label, *(stats or (None,) * 5)))
    return Table(
        f"Distribution over all {total:,} ranks",
        SPREAD_COLUMNS,
        tuple(rows),
        tuple(values),
        caption=f"{hidden:,} of {total:,} ranks not shown above; {ALL_IN_JSON}",
    )


def host_list(hostnames: Sequence[str]) -> str:
    """``N: a, b, c``; beyond ``HOSTS_LISTED`` the first and the last few around "..."."""
    if len(hostnames) <= HOSTS_LISTED:
        return f"{len(hostnames)}: {', '.join(hostnames)}"
    head, tail = hostnames[: HOSTS_LISTED - 4], hostnames[-2:]
    return f"{len(hostnames):,}: {', '.join(head)}, ..., {', '.join(tail)}"


def condensed_blocks(
    a: RunAnalysis, table: Table, ranks: Sequence[int], metrics: Sequence[RankMetric]
) -> tuple[Table, Table]:
    """A per-rank table beyond RANK_ROWS_LIMIT ranks: its slowest and fastest ranks, and the
    distribution of ``metrics`` over every rank."""
    shown = shown_ranks(a.slowest_first, ranks)
    return (
        condensed_rank_table(table, ranks, shown, hosts_of(a)),
        spread_table(metrics, shown.total, shown.hidden),
    )
