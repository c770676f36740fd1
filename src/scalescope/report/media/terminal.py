"""A Document on the terminal with rich: charts are left to the HTML page.

``render_document`` prints a document; ``document_renderable`` gives it as one rich renderable
for a view that redraws itself (``top``'s frame in ``rich.live.Live``).
"""

from __future__ import annotations

from rich.console import Console, Group, RenderableType
from rich.rule import Rule
from rich.table import Table as RichTable
from rich.text import Text

from scalescope.report.document import (
    Block,
    Bullets,
    Column,
    Document,
    Grid,
    Heading,
    Item,
    Items,
    Line,
    Preformatted,
    Section,
    Style,
    Table,
)
from scalescope.report.formatting import kv_grid

TERMINAL_STYLES = {"note": "dim"}
"""Document styles that are not rich style names."""
FRAMES = {
    "box": {},
    "inner": {"show_edge": False, "pad_edge": False},
    "none": {"box": None, "pad_edge": False},
}


def _style(style: Style) -> str:
    return TERMINAL_STYLES.get(style, style)


def _cell(col: Column, text: str, style: Style) -> Text:
    if not col.marks:
        return Text(text, style=_style(style))
    out = Text(style=_style(style))
    for run, mark in col.mark_runs(text):
        out.append(run, style=_style(mark))
    return out


def rich_table(table: Table) -> RichTable:
    """Titles and captions as Text (no markup read in them) in rich's table styles."""
    out = RichTable(
        title=Text(table.title, style="table.title"), title_justify="left", **FRAMES[table.frame]
    )
    for col in table.columns:
        out.add_column(col.header, justify=col.align, no_wrap=col.no_wrap, min_width=col.min_width)
    styles = table.styles or ("",) * len(table.rows)
    cell_styles = table.cell_styles or (("",) * len(table.columns),) * len(table.rows)
    for group in table.grouped_rows():
        for i in group:
            cells = zip(table.columns, table.rows[i], cell_styles[i], strict=True)
            out.add_row(
                *(_cell(col, text, style) for col, text, style in cells),
                style=_style(styles[i]) or None,
                end_section=table.groups is not None and i == group[-1],
            )
    if table.caption:
        out.caption = Text(table.caption, style="table.caption")
        out.caption_justify = "left"
    return out


def titled_grid(grid: Grid) -> RichTable:
    """Key-value rows under a title, long values folded."""
    out = RichTable(
        title=Text(grid.title, style="table.title"),
        title_justify="left",
        show_header=False,
        box=None,
    )
    out.add_column(style="bold", no_wrap=True)
    out.add_column(overflow="fold")
    for key, value in grid.rows:
        out.add_row(Text(key), Text(value))
    return out


def preformatted_text(block: Preformatted) -> Text:
    styles = block.styles or ("",) * len(block.lines)
    shown = list(zip(block.lines, styles, strict=True))
    if block.tail is not None:
        shown = shown[len(shown) - block.tail :] if block.tail < len(shown) else shown
    return Text("\n").join(Text(line, style=style) for line, style in shown)


def bullets_lines(block: Bullets, indent: int = 0) -> list[Text]:
    head = Text(" " * indent + f"{block.caption}:", style="bold")
    return [head, *(Text(" " * (indent + 2) + f"- {entry}") for entry in block.entries)]


def item_lines(number: int, item: Item) -> list[Text]:
    """``1. label (aside): text``, then its lines and lists indented under the number."""
    head = Text(f"{number}. ", style="bold")
    if item.label:
        head.append(item.label, style=f"bold {item.style}" if item.style else "bold")
        if item.aside:
            head.append(f" {item.aside}", style="dim")
        head.append(": ")
    head.append(item.text)
    lines = [head, *(Text(f"   {line}") for line in item.lines)]
    for bullets in item.lists:
        lines += bullets_lines(bullets, indent=3)
    return lines


def line_text(block: Line) -> Text:
    if block.label:
        text = Text.assemble((block.label, _style(block.style) or "bold"), " ", block.text)
    else:
        text = Text(block.text, style=_style(block.style))
    for run, style in block.after:
        text.append(run, style=_style(style))
    return text


def heading(block: Heading) -> RenderableType:
    if block.rule:
        return Rule(Text(block.text))
    return Text.assemble((block.text, "bold"), f" {block.detail}" if block.detail else "")


def block_renderables(block: Block) -> list[RenderableType]:
    """What the terminal shows of ``block``, in order; a section starts with a blank line and
    a rule of its title."""
    if isinstance(block, Heading):
        return [heading(block)]
    if isinstance(block, Line):
        return [line_text(block)]
    if isinstance(block, Grid):
        return [titled_grid(block) if block.title else kv_grid(list(block.rows))]
    if isinstance(block, Table):
        return [rich_table(block)]
    if isinstance(block, Preformatted):
        return [preformatted_text(block)]
    if isinstance(block, Bullets):
        return list(bullets_lines(block))
    if isinstance(block, Items):
        return [line for i, item in enumerate(block.items, 1) for line in item_lines(i, item)]
    if isinstance(block, Section):
        inner = [r for b in block.blocks for r in block_renderables(b)]
        return [*section_head(block), *inner]
    return []


def section_head(block: Section) -> list[RenderableType]:
    """A blank line and a rule with the section's title in it."""
    return [Text(""), Rule(Text(block.title))]


def render_block(block: Block, console: Console) -> None:
    """Preformatted lines are printed unwrapped (soft wrap), as written."""
    if isinstance(block, Section):
        for shown in section_head(block):
            console.print(shown)
        for inner in block.blocks:
            render_block(inner, console)
        return
    soft_wrap = True if isinstance(block, Preformatted) else None
    for shown in block_renderables(block):
        console.print(shown, soft_wrap=soft_wrap)


def render_document(doc: Document, console: Console) -> None:
    for block in doc.blocks:
        render_block(block, console)


def document_renderable(doc: Document) -> RenderableType:
    return Group(*(r for b in doc.blocks for r in block_renderables(b)))
