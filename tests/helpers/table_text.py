"""Read back a rich table printed to a terminal (or a pipe): its column headers exactly,
whether or not rich wrapped them over several lines."""

from __future__ import annotations

HEADER_EDGE = "┃"
"""The left edge of a header row in rich's default box (HEAVY_HEAD); body rows use │."""


def header_columns(text: str) -> list[list[str]]:
    """Each table's headers in ``text``, a wrapped header joined back with spaces."""
    tables: list[list[str]] = []
    rows: list[list[str]] = []
    for line in [*text.splitlines(), ""]:
        if line.startswith(HEADER_EDGE):
            rows.append(
                [cell.strip() for cell in line.strip().strip(HEADER_EDGE).split(HEADER_EDGE)]
            )
        elif rows:
            tables.append([" ".join(p for p in parts if p) for parts in zip(*rows, strict=True)])
            rows = []
    return tables
