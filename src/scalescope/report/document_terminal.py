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

TERMINAL_STYLES = {"note": "dim"}
"""Document styles that are not rich style names."""


def rich_table(table: Table) -> RichTable:
    """Titles and captions as Text (no markup read in them) in rich's table styles."""
    out = RichTable(title=Text(table.title, style="table.title"), title_justify="left")
    for col in table.columns:
        out.add_column(col.header, justify=col.align, no_wrap=col.no_wrap, min_width=col.min_width)
    styles = table.styles or ("",) * len(table.rows)
    for group in table.grouped_rows():
        for i in group:
            out.add_row(
                *(Text(cell) for cell in table.rows[i]),
                style=styles[i] or None,
                end_section=table.groups is not None and i == group[-1],
            )
    if table.caption:
        out.caption = Text(table.caption, style="table.caption")
        out.caption_justify = "left"
    return out


def preformatted_text(block: Preformatted) -> Text:
    styles = block.styles or ("",) * len(block.lines)
    shown = list(zip(block.lines, styles, strict=True))
    if block.tail is not None:
        shown = shown[len(shown) - block.tail :] if block.tail < len(shown) else shown
    return Text("\n").join(Text(line, style=style) for line, style in shown)


def render_block(block: Block, console: Console) -> None:
    if isinstance(block, Heading) and block.rule:
        console.rule(Text(block.text))
    elif isinstance(block, Heading):
        console.print(
            Text.assemble((block.text, "bold"), f" {block.detail}" if block.detail else "")
        )
    elif isinstance(block, Line):
        if block.label:
            console.print(Text.assemble((block.label, block.style or "bold"), " ", block.text))
        else:
            console.print(Text(block.text, style=TERMINAL_STYLES.get(block.style, block.style)))
    elif isinstance(block, Grid):
        console.print(kv_grid(list(block.rows)))
    elif isinstance(block, Table):
        console.print(rich_table(block))
    elif isinstance(block, Preformatted):
        console.print(preformatted_text(block), soft_wrap=True)
    elif isinstance(block, Section):
        section(console, block.title)
        for inner in block.blocks:
            render_block(inner, console)


def render_document(doc: Document, console: Console) -> None:
    for block in doc.blocks:
        render_block(block, console)
