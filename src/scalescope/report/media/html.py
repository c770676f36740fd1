"""A Document as one self-contained HTML page (plotly inline); every text is escaped."""

from __future__ import annotations

from scalescope.events.units import fmt_bytes
from scalescope.report.document import (
    Block,
    Bullets,
    Chart,
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
from scalescope.report.formatting import NA
from scalescope.report.media.page import chart_html, esc, page


def _ident(html_id: str) -> str:
    return f' id="{esc(html_id)}"' if html_id else ""


def _text_html(col: Column, text: str) -> str:
    """Escaped; each line of a cell on its own line, each marked letter in its style."""
    if not col.marks:
        return "<br>".join(esc(line) for line in text.split("\n"))
    return "".join(
        f'<span class="{mark}">{esc(run)}</span>' if mark else esc(run)
        for run, mark in col.mark_runs(text)
    )


def _td(col: Column, style: Style) -> str:
    classes = " ".join(c for c in ("num" if col.align == "right" else "", style) if c)
    return f'<td class="{classes}">' if classes else "<td>"


def _row_html(table: Table, i: int) -> str:
    style = table.styles[i] if table.styles else ""
    values = table.values[i] if table.values else (None,) * len(table.columns)
    cell_styles = table.cell_styles[i] if table.cell_styles else ("",) * len(table.columns)
    cells = []
    for col, cell, value, cell_style in zip(
        table.columns, table.rows[i], values, cell_styles, strict=True
    ):
        if col.byte_size:
            cell = NA if value is None else fmt_bytes(float(value))
        cells.append(f"{_td(col, cell_style)}{_text_html(col, cell)}</td>")
    return (f'<tr class="{style}">' if style else "<tr>") + "".join(cells) + "</tr>"


def table_html(table: Table) -> str:
    """Byte-size columns readable ("4.00 MiB", the unit in the cells), one ``<tbody>`` per
    group of rows, the caption as a note under the table."""
    head = "".join(f"<th>{esc(c.name if c.byte_size else c.header)}</th>" for c in table.columns)
    body = "".join(
        "<tbody>" + "".join(_row_html(table, i) for i in group) + "</tbody>"
        for group in table.grouped_rows()
    )
    title = f"<caption>{esc(table.title)}</caption>" if table.title else ""
    note = f'<p class="note">{esc(table.caption)}</p>' if table.caption else ""
    return (
        f"<table{_ident(table.html_id)}>{title}<thead><tr>{head}</tr></thead>{body}</table>{note}"
    )


def bullets_html(block: Bullets) -> str:
    entries = "".join(f"<li>{esc(e)}</li>" for e in block.entries)
    return f"<p>{esc(block.caption)}:</p><ul>{entries}</ul>"


def item_html(item: Item) -> str:
    head = esc(item.text)
    if item.label:
        aside = f" <small>{esc(item.aside)}</small>" if item.aside else ""
        head = f"{esc(item.label)}{aside}: {head}"
    lines = "".join(f"<br>{esc(line)}" for line in item.lines)
    lists = "".join(bullets_html(b) for b in item.lists)
    css = f' class="{esc(item.html_class)}"' if item.html_class else ""
    return f"<li{css}><b>{head}</b>{lines}{lists}</li>"


def line_html(block: Line) -> str:
    """Nothing for an empty line (a gap between the terminal's tables)."""
    if not block.plain:
        return ""
    after = "".join(
        f'<span class="{style}">{esc(run)}</span>' if style else esc(run)
        for run, style in block.after
    )
    if block.label:
        return f"<p><strong>{esc(block.label)}</strong> {esc(block.text)}{after}</p>"
    style = f' class="{block.style}"' if block.style else ""
    return f"<p{style}{_ident(block.html_id)}>{esc(block.text)}{after}</p>"


def block_html(block: Block, level: int = 1) -> str:
    if isinstance(block, Heading):
        detail = f" <small>{esc(block.detail)}</small>" if block.detail else ""
        return f"<h{level}>{esc(block.text)}{detail}</h{level}>"
    if isinstance(block, Line):
        return line_html(block)
    if isinstance(block, Grid):
        rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in block.rows)
        title = f"<caption>{esc(block.title)}</caption>" if block.title else ""
        return f'<table class="grid">{title}<tbody>{rows}</tbody></table>'
    if isinstance(block, Table):
        return table_html(block)
    if isinstance(block, Preformatted):
        return f"<pre{_ident(block.html_id)}>{esc(chr(10).join(block.lines))}</pre>"
    if isinstance(block, Bullets):
        return bullets_html(block)
    if isinstance(block, Items):
        return f"<ol>{''.join(item_html(i) for i in block.items)}</ol>"
    if isinstance(block, Chart):
        return chart_html(block)
    if isinstance(block, Section):
        inner = "".join(block_html(b, level + 1) for b in block.blocks)
        css = f' class="{esc(block.html_class)}"' if block.html_class else ""
        head = f"<section{_ident(block.html_id)}{css}><h2>{esc(block.title)}</h2>"
        return f"{head}{inner}</section>"
    raise TypeError(f"not a document block: {type(block).__name__}")


def document_html(doc: Document) -> str:
    return page(doc.title, [block_html(b) for b in doc.blocks])
