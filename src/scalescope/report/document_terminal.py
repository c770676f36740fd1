"""A Document on the terminal with rich: charts are left to the HTML page."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from scalescope.report.document import (
    Block,
    Document,
    Grid,
    Heading,
    Line,
    Preformatted,
    Section,
    Table,
)
from scalescope.report.formatting import kv_grid, section


def rich_table(table: Table) -> RichTable:
    out = RichTable(title=Text(table.title), title_justify="left")
    for col in table.columns:
        out.add_column(col.header, justify=col.align)
    styles = table.styles or ("",) * len(table.rows)
    for row, style in zip(table.rows, styles, strict=True):
        out.add_row(*(Text(cell) for cell in row), style=style or None)
    return out


def render_block(block: Block, console: Console) -> None:
    if isinstance(block, Heading):
        console.print(
            Text.assemble((block.text, "bold"), f" {block.detail}" if block.detail else "")
        )
    elif isinstance(block, Line):
        if block.label:
            console.print(Text.assemble((block.label, block.style or "bold"), " ", block.text))
        else:
            console.print(Text(block.text, style=block.style))
    elif isinstance(block, Grid):
        console.print(kv_grid(list(block.rows)))
    elif isinstance(block, Table):
        console.print(rich_table(block))
    elif isinstance(block, Preformatted):
        console.print(Text("\n".join(block.lines)), soft_wrap=True)
    elif isinstance(block, Section):
        section(console, block.title)
        for inner in block.blocks:
            render_block(inner, console)


def render_document(doc: Document, console: Console) -> None:
    for block in doc.blocks:
        render_block(block, console)
