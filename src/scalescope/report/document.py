"""One neutral document per subject, rendered to the terminal and HTML alike.

A view builds a `Document` of blocks (headings, lines, key-value grids, tables whose columns
carry their units, preformatted text, charts as data, sections); `media.terminal` and
`media.html` render any document, so the terminal and the page of a subject say the same
things by construction, and a new command writes one builder. A command's JSON is its own
schema, written by its own encoder, never a document's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import plotly.graph_objects as go

Style = Literal[
    "", "bold", "red", "yellow", "green", "blue", "magenta", "bold red", "bold yellow", "note"
]
"""``note``: an aside (dim on the terminal, grey italics on the page)."""
Frame = Literal["box", "inner", "none"]
"""A table's lines on the terminal: ``box`` all around, ``inner`` between the columns and under
the header only, ``none`` no lines and rows flush left (a frame of ``top``)."""


@dataclass(frozen=True)
class Heading:
    """A title line, with plain text after it."""

    text: str
    detail: str = ""
    rule: bool = False
    """A report's title: a rule across the terminal with the text in it."""


@dataclass(frozen=True)
class Line:
    """A sentence; ``label`` is a word shown in ``style`` before it ("failed", "unavailable");
    with no label the whole sentence takes the style."""

    text: str
    label: str = ""
    style: Style = ""
    html_id: str = ""
    after: tuple[tuple[str, Style], ...] = ()
    """Text after the sentence in runs of their own style (a legend's coloured letters)."""

    @property
    def plain(self) -> str:
        """The whole line without styles."""
        head = f"{self.label} {self.text}" if self.label else self.text
        return head + "".join(run for run, _ in self.after)


@dataclass(frozen=True)
class Grid:
    """Key-value rows; with a ``title``, the rows sit indented under it."""

    rows: tuple[tuple[str, str], ...]
    title: str = ""


@dataclass(frozen=True)
class Column:
    name: str
    unit: str = ""
    """Printed after the name, "time avg (µs)"; empty for text and counts."""
    align: Literal["left", "right"] = "right"
    no_wrap: bool = False
    """Keep each cell on one line on the terminal (op names)."""
    min_width: int | None = None
    """The narrowest the column gets on the terminal (a wide table's short columns)."""
    byte_size: bool = False
    """Cells are exact byte counts ("4,194,304", the terminal's and the JSON's text) and values
    the integers; the page shows them readable ("4.00 MiB") under the bare name."""
    marks: tuple[tuple[str, Style], ...] = ()
    """Letters drawn each in its style (a phase bar: ``d`` for data in yellow)."""

    @property
    def header(self) -> str:
        return f"{self.name} ({self.unit})" if self.unit else self.name

    def mark_runs(self, text: str) -> list[tuple[str, Style]]:
        """``text`` in runs of one style each, by ``marks``."""
        marks = dict(self.marks)
        runs: list[tuple[str, Style]] = []
        for char in text:
            style = marks.get(char, "")
            if runs and runs[-1][1] == style:
                runs[-1] = (runs[-1][0] + char, style)
            else:
                runs.append((char, style))
        return runs


@dataclass(frozen=True)
class Table:
    """Cells are the text shown; ``values`` (same shape, optional) are the numbers behind them,
    in the column's unit, for programs."""

    title: str
    columns: tuple[Column, ...]
    rows: tuple[tuple[str, ...], ...]
    values: tuple[tuple[float | int | str | None, ...], ...] | None = None
    html_id: str = ""
    """The table's id in the HTML page, for links and tests (empty: none)."""
    styles: tuple[Style, ...] | None = None
    """One per row: a failed row in red, a doubtful one in yellow."""
    caption: str = ""
    """A note under the table: what the columns mean, what was left out."""
    groups: tuple[int, ...] | None = None
    """Rows per group, in order (a rank's phases): a rule between groups on the terminal, one
    ``<tbody>`` each in HTML."""
    cell_styles: tuple[tuple[Style, ...], ...] | None = None
    """One per cell, over its row's style (a dead rank's status)."""
    frame: Frame = "box"

    def __post_init__(self) -> None:
        width = len(self.columns)
        if any(len(row) != width for row in self.rows):
            raise ValueError(f"table {self.title!r}: every row needs {width} cells")
        if self.values is not None and len(self.values) != len(self.rows):
            raise ValueError(f"table {self.title!r}: values and rows differ in length")
        if self.styles is not None and len(self.styles) != len(self.rows):
            raise ValueError(f"table {self.title!r}: styles and rows differ in length")
        if self.groups is not None and sum(self.groups) != len(self.rows):
            raise ValueError(f"table {self.title!r}: groups do not add up to the rows")
        if self.cell_styles is not None and any(len(r) != width for r in self.cell_styles):
            raise ValueError(f"table {self.title!r}: every row of cell styles needs {width}")
        if self.cell_styles is not None and len(self.cell_styles) != len(self.rows):
            raise ValueError(f"table {self.title!r}: cell styles and rows differ in length")
        if self.values is None and any(c.byte_size for c in self.columns):
            raise ValueError(f"table {self.title!r}: a byte-size column needs values")

    def grouped_rows(self) -> list[list[int]]:
        """Row indexes per group (one group when the table has none)."""
        sizes = self.groups if self.groups is not None else (len(self.rows),)
        starts = [sum(sizes[:i]) for i in range(len(sizes))]
        return [list(range(start, start + n)) for start, n in zip(starts, sizes, strict=True)]


@dataclass(frozen=True)
class Preformatted:
    """Lines kept exactly as written (a block in another tool's format, such as OSU's)."""

    lines: tuple[str, ...]
    styles: tuple[Style, ...] | None = None
    """One per line, for the terminal (the page keeps the block plain text)."""
    tail: int | None = None
    """The terminal shows only the last ``tail`` lines (a traceback's end); the page and the
    JSON hold them all."""
    html_id: str = ""

    def __post_init__(self) -> None:
        if self.styles is not None and len(self.styles) != len(self.lines):
            raise ValueError("preformatted: styles and lines differ in length")


@dataclass(frozen=True)
class Bullets:
    """A captioned list ("not judged:", an item's "evidence:")."""

    caption: str
    entries: tuple[str, ...]


@dataclass(frozen=True)
class Item:
    """One entry of a numbered list: ``label`` (bold, in ``style``), an ``aside`` after it,
    the text, then lines and captioned lists under it."""

    text: str
    label: str = ""
    style: Style = ""
    aside: str = ""
    lines: tuple[str, ...] = ()
    lists: tuple[Bullets, ...] = ()
    html_class: str = ""


@dataclass(frozen=True)
class Items:
    """A numbered list of items (the diagnosis's findings, best first)."""

    items: tuple[Item, ...]


@dataclass(frozen=True)
class Section:
    title: str
    blocks: tuple[Block, ...]
    html_id: str = ""
    html_class: str = ""
    """The page's class of the section (``card``: a summary card)."""


@dataclass(frozen=True)
class Chart:
    """One chart of the page: a figure, or a note saying why it is missing."""

    chart_id: str
    title: str
    figure: go.Figure | None
    note: str = ""


Block = Heading | Line | Grid | Table | Preformatted | Bullets | Items | Chart | Section


@dataclass(frozen=True)
class Document:
    title: str
    """The page title (HTML) and the document's name (JSON); the terminal shows its blocks."""
    blocks: tuple[Block, ...] = field(default_factory=tuple)
