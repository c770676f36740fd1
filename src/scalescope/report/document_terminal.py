"""A Document on the terminal with rich: charts are left to the HTML page."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from scalescope.report.document import (
    Block,
    Bullets,
    Document,
    Grid,
    Heading,
    Item,
    Items,
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


def render_bullets(block: Bullets, console: Console, indent: int = 0) -> None:
    console.print(Text(" " * indent + f"{block.caption}:", style="bold"))
    for entry in block.entries:
        console.print(Text(" " * (indent + 2) + f"- {entry}"))


def render_item(number: int, item: Item, console: Console) -> None:
    """``1. label (aside): text``, then its lines and lists indented under the number."""
    head = Text(f"{number}. ", style="bold")
    if item.label:
        head.append(item.label, style=f"bold {item.style}" if item.style else "bold")
        if item.aside:
            head.append(f" {item.aside}", style="dim")
        head.append(": ")
    head.append(item.text)
    console.print(head)
    for line in item.lines:
        console.print(Text(f"   {line}"))
    for bullets in item.lists:
        render_bullets(bullets, console, indent=3)


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
    elif isinstance(block, Bullets):
        render_bullets(block, console)
    elif isinstance(block, Items):
        for number, item in enumerate(block.items, start=1):
            render_item(number, item, console)
    elif isinstance(block, Section):
        section(console, block.title)
        for inner in block.blocks:
            render_block(inner, console)


def render_document(doc: Document, console: Console) -> None:
    for block in doc.blocks:
        render_block(block, console)
