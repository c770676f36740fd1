"""A Document as one self-contained HTML page (plotly inline); every text is escaped."""

from __future__ import annotations

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
from scalescope.report.html import chart_html, esc, page
from scalescope.report.html_charts import Chart


def table_html(table: Table) -> str:
    head = "".join(f"<th>{esc(c.header)}</th>" for c in table.columns)
    styles = table.styles or ("",) * len(table.rows)
    body = "".join(
        (f'<tr class="{style}">' if style else "<tr>")
        + "".join(
            f'<td class="num">{esc(cell)}</td>' if col.align == "right" else f"<td>{esc(cell)}</td>"
            for col, cell in zip(table.columns, row, strict=True)
        )
        + "</tr>"
        for row, style in zip(table.rows, styles, strict=True)
    )
    caption = f"<caption>{esc(table.title)}</caption>" if table.title else ""
    ident = f' id="{esc(table.html_id)}"' if table.html_id else ""
    return f"<table{ident}>{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def block_html(block: Block, level: int = 1) -> str:
    if isinstance(block, Heading):
        detail = f" <small>{esc(block.detail)}</small>" if block.detail else ""
        return f"<h{level}>{esc(block.text)}{detail}</h{level}>"
    if isinstance(block, Line):
        label = f"<strong>{esc(block.label)}</strong> " if block.label else ""
        return f"<p>{label}{esc(block.text)}</p>"
    if isinstance(block, Grid):
        rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in block.rows)
        return f'<table class="grid"><tbody>{rows}</tbody></table>'
    if isinstance(block, Table):
        return table_html(block)
    if isinstance(block, Preformatted):
        return f"<pre>{esc(chr(10).join(block.lines))}</pre>"
    if isinstance(block, Chart):
        return chart_html(block)
    if isinstance(block, Section):
        inner = "".join(block_html(b, level + 1) for b in block.blocks)
        return f"<section><h2>{esc(block.title)}</h2>{inner}</section>"
    raise TypeError(f"not a document block: {type(block).__name__}")


def document_html(doc: Document) -> str:
    return page(doc.title, [block_html(b) for b in doc.blocks])
