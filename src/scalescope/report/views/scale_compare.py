"""``scalescope compare A B`` when either run is analysed from its node files
(diagnose/scale_compare.py): a few lines for the terminal, the JSON (``scale_compare/1``,
docs/report-schema.md) and the page (a Document on the shared page, report/media/html.py).
Each lists at most ``LISTED`` late nodes, ranks and links; the JSON holds them all."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from scalescope.diagnose.scale_compare import Figure, LateChange, ScaleComparison
from scalescope.diagnose.scale_sides import RunSide
from scalescope.report.document import Block, Column, Document, Grid, Heading, Line, Table
from scalescope.report.formatting import NA

SCHEMA = "scale_compare/1"
LISTED = 5
SPREAD_KEYS = ("min", "p10", "p50", "p90", "max")


def ms(value: float | None, spec: str = ",.2f") -> str:
    return NA if value is None or value != value else format(value, spec)


def pct(value: float | None) -> str:
    return NA if value is None else f"{value:+.1f} %"


def fig(f: Figure, unit: str = "ms") -> str:
    """ "A 1.00 ms, B 2.00 ms (+100.0 %)"; a side without it: "A 1.00 ms, none in B"."""
    if f.b is None:
        return f"A {ms(f.a)} {unit}, none in B"
    if f.a is None:
        return f"B {ms(f.b)} {unit}, none in A"
    return f"A {ms(f.a)} {unit}, B {ms(f.b)} {unit} ({pct(f.change_pct)})"


def side_line(name: str, s: RunSide) -> str:
    return (f"{name} = {s.run}: analysed from {s.analysed_from} ({s.nodes:,} nodes, "
            f"{s.world_size:,} ranks; measured steps per rank {s.measured_steps[0]:,}-"
            f"{s.measured_steps[1]:,})")  # fmt: skip


def step_line(c: ScaleComparison) -> str:
    s = c.step
    if s.noise_ms is None:
        judged = "not judged against the steps' spread (a run has fewer than 2 steps)"
    else:
        where = "beyond" if s.beyond_spread else "within"
        judged = (f"{where} the steps' spread: the mean step {ms(s.mean_ms.a)} -> "
                  f"{ms(s.mean_ms.b)} ms over {c.a.steps.steps:,} and {c.b.steps.steps:,} "
                  f"steps, noise {ms(s.noise_ms)} ms")  # fmt: skip
    return f"step (median over ranks of their mean): {fig(s.median_ms)}, {judged}"


def spread_line(what: str, spreads: dict[str, Figure] | None) -> list[str]:
    if spreads is None:
        return []
    cells = ", ".join(f"{k} {ms(f.a)} -> {ms(f.b)} ({pct(f.change_pct)})"
                      for k, f in spreads.items())  # fmt: skip
    return [f"{what} (ms): {cells}"]


def cause_lines(c: ScaleComparison) -> list[str]:
    out = [f"verdict A: {c.a.verdict}", f"verdict B: {c.b.verdict}"]
    for x in c.causes:
        who = f" ({x.culprit})" if x.culprit else ""
        out.append(f"{x.status}: {x.bottleneck}{who}, cost per step {fig(x.cost_ms)}")
    return out


def late_lines(what: str, changes: tuple[LateChange, ...] | None, unit: str) -> list[str]:
    if changes is None:
        return []
    if not changes:
        return [f"{what}: none in either run"]
    out = [f"{what} {x.status}: {x.name}, {fig(x.figure, unit)}" for x in changes[:LISTED]]
    if len(changes) > LISTED:
        out.append(f"{what}: {len(changes) - LISTED:,} more in the JSON")
    return out


def gain_lines(c: ScaleComparison) -> list[str]:
    if c.node_whatif is None:
        return []
    if not c.node_whatif:
        return ["what-if, nodes as units: no late node in either run"]
    return [f"what-if, {g.host} at the median node's pace: gain {fig(g.gain_ms, 'ms/step')}"
            for g in c.node_whatif[:LISTED]]  # fmt: skip


def compare_lines(c: ScaleComparison) -> list[str]:
    """The terminal's comparison; every change is B's against A's."""
    return [
        "scalescope compare (changes are B against A)",
        side_line("A", c.a), side_line("B", c.b), *c.notes, step_line(c),
        *spread_line("ranks' mean step", c.rank_step_ms),
        *spread_line("nodes' mean busy per step", c.node_busy_ms),
        *cause_lines(c),
        *late_lines("late node", c.late_nodes, "ms/step busy above median"),
        *late_lines("late rank", c.late_ranks, "ms/step busy above median"),
        *late_lines("slow link", c.slow_links, "ms/call"),
        *gain_lines(c),
    ]  # fmt: skip


def scale_compare_text(c: ScaleComparison) -> str:
    return "\n".join(compare_lines(c))


def scale_compare_json(c: ScaleComparison) -> bytes:
    data: dict[str, Any] = {"schema": SCHEMA, **msgspec.to_builtins(c)}
    return msgspec.json.format(msgspec.json.encode(data), indent=2) + b"\n"


FIGURE_COLUMNS = (Column("A", "ms"), Column("B", "ms"), Column("change", "%"))


def _cells(f: Figure) -> tuple[str, str, str]:
    return ms(f.a), ms(f.b), NA if f.change_pct is None else f"{f.change_pct:+.1f}"


def figure_table(title: str, names: tuple[str, ...], rows: Iterable[tuple[Any, ...]],
                 html_id: str, caption: str = "") -> Table:  # fmt: skip
    """Rows of a cell per name of ``names`` then a Figure."""
    body = tuple((*lead, *_cells(f)) for *lead, f in rows)
    cols = tuple(Column(n, align="left") for n in names)
    return Table(title, (*cols, *FIGURE_COLUMNS), body, html_id=html_id, caption=caption)


def _late_table(title: str, changes: tuple[LateChange, ...] | None, html_id: str,
                unit: str) -> Block | None:  # fmt: skip
    if changes is None:
        return None
    if not changes:
        return Line(f"{title}: none in either run.", html_id=html_id)
    return figure_table(title, ("status", "name"), ((x.status, x.name, x.figure) for x in changes),
                        html_id, caption=unit)  # fmt: skip


def scale_compare_document(c: ScaleComparison) -> Document:
    """The compare page: the same figures as the terminal's lines, as tables."""
    s = c.step
    steps = [("median over ranks of their mean step", s.median_ms),
             ("mean over the steps", s.mean_ms)]  # fmt: skip
    for what, spreads in (("ranks' mean step", c.rank_step_ms),
                          ("nodes' mean busy per step", c.node_busy_ms)):  # fmt: skip
        steps += [(f"{what}: {k}", f) for k, f in (spreads or {}).items()]
    causes = figure_table("Verdicts' causes (cost per step)", ("status", "cause", "culprit"),
                          ((x.status, x.bottleneck, x.culprit or NA, x.cost_ms)
                           for x in c.causes), "causes")  # fmt: skip
    late = [
        _late_table("Late nodes", c.late_nodes, "late-nodes", "busy above median, ms/step"),
        _late_table("Late ranks", c.late_ranks, "late-ranks", "busy above median, ms/step"),
        _late_table("Slow links", c.slow_links, "slow-links", "transfer, ms/call"),
    ]
    gains = None if not c.node_whatif else figure_table(
        "What-if, nodes as units (gain per step)", ("node at the median node's pace",),
        ((g.host, g.gain_ms) for g in c.node_whatif), "node-whatif")  # fmt: skip
    blocks: list[Block | None] = [
        Heading("scalescope compare", "changes are B against A", rule=True),
        Grid((("A", side_line("A", c.a)[4:]), ("B", side_line("B", c.b)[4:]))),
        *(Line(n, style="yellow") for n in c.notes),
        Line(step_line(c), html_id="step-change"),
        figure_table("Step", ("",), ((w, f) for w, f in steps), "steps"),
        Line(f"Verdict A: {c.a.verdict}"), Line(f"Verdict B: {c.b.verdict}"),
        causes if c.causes else Line("No cause in either verdict.", html_id="causes"),
        *late, gains,
    ]  # fmt: skip
    return Document("scalescope compare (node files)", tuple(b for b in blocks if b))
