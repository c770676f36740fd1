"""A Document as JSON builtins: each block with its kind, tables with their columns' units and
the numbers behind the cells, charts as plotly figure JSON."""

from __future__ import annotations

import json
from typing import Any

from scalescope.report.document import (
    Block,
    Bullets,
    Chart,
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

DOCUMENT_SCHEMA = "scalescope.document/1"


def block_json(block: Block) -> dict[str, Any]:
    if isinstance(block, Heading):
        return {"kind": "heading", "text": block.text, "detail": block.detail}
    if isinstance(block, Line):
        text = block.text + "".join(run for run, _ in block.after)
        return {"kind": "line", "label": block.label, "text": text}
    if isinstance(block, Grid):
        return {"kind": "grid", "title": block.title, "rows": [list(r) for r in block.rows]}
    if isinstance(block, Table):
        return {
            "kind": "table",
            "title": block.title,
            "columns": [{"name": c.name, "unit": c.unit} for c in block.columns],
            "rows": [list(r) for r in block.rows],
            "values": None if block.values is None else [list(v) for v in block.values],
            "caption": block.caption,
            "groups": None if block.groups is None else list(block.groups),
        }
    if isinstance(block, Preformatted):
        return {"kind": "preformatted", "lines": list(block.lines)}
    if isinstance(block, Bullets):
        return {"kind": "bullets", "caption": block.caption, "entries": list(block.entries)}
    if isinstance(block, Items):
        return {"kind": "items", "items": [_item_json(i) for i in block.items]}
    if isinstance(block, Chart):
        figure = None if block.figure is None else json.loads(block.figure.to_json())
        return {
            "kind": "chart",
            "id": block.chart_id,
            "title": block.title,
            "figure": figure,
            "note": block.note,
        }
    if isinstance(block, Section):
        return {
            "kind": "section",
            "title": block.title,
            "blocks": [block_json(b) for b in block.blocks],
        }
    raise TypeError(f"not a document block: {type(block).__name__}")


def _item_json(item: Item) -> dict[str, Any]:
    return {
        "label": item.label,
        "aside": item.aside,
        "text": item.text,
        "lines": list(item.lines),
        "lists": [block_json(b) for b in item.lists],
    }


def document_json(doc: Document) -> dict[str, Any]:
    return {
        "schema": DOCUMENT_SCHEMA,
        "title": doc.title,
        "blocks": [block_json(b) for b in doc.blocks],
    }
