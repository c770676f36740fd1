"""One document, two renderers: the terminal and the HTML page say the same things, units
travel with the columns, and every user-supplied string is escaped in HTML."""

from __future__ import annotations

import html

import pytest
from rich.console import Console

from scalescope.analyze.comm.comm_bench import comm_results
from scalescope.report.document import (
    Column,
    Document,
    Grid,
    Heading,
    Line,
    Preformatted,
    Section,
    Table,
)
from scalescope.report.media.html import document_html
from scalescope.report.media.terminal import document_renderable, render_document
from scalescope.report.views.comm import COMM_CHART_IDS, comm_document

HOSTILE = "<script>alert('x')</script> [bold]&"


def terminal_text(doc: Document) -> str:
    console = Console(record=True, width=200, markup=False, highlight=False)
    render_document(doc, console)
    return console.export_text()


def every_kind() -> Document:
    table = Table(
        "sizes",
        (Column("op", align="left"), Column("time", "µs"), Column("busbw", "GB/s")),
        (("all_reduce", "1,010.00", "1.485"), (HOSTILE, "5.00", "0.002")),
        (("all_reduce", 1010.0, 1.485), (HOSTILE, 5.0, 0.002)),
    )
    return Document(
        f"page {HOSTILE}",
        (
            Heading("Benchmark", f"on {HOSTILE}"),
            Line("a plain sentence"),
            Line(f"gloo at 8 B: {HOSTILE}", "failed", "red"),
            Grid((("host", HOSTILE), ("ranks", "4"))),
            table,
            Preformatted(("# Size  Avg", "8       12.50")),
            Section("More", (Line("inside a section"),)),
        ),
    )


def test_the_same_cells_in_terminal_and_html() -> None:
    doc = every_kind()
    text, page = terminal_text(doc), document_html(doc)
    for cell in ("all_reduce", "1,010.00", "1.485", "a plain sentence", "inside a section"):
        assert cell in text and cell in page
    assert "time (µs)" in text and "<th>time (µs)</th>" in page


def test_user_strings_are_escaped_in_html_and_printed_verbatim_on_the_terminal() -> None:
    doc = every_kind()
    page = document_html(doc)
    assert "<script>alert" not in page
    assert html.escape(HOSTILE) in page
    assert HOSTILE in terminal_text(doc)


def test_a_ragged_table_is_refused() -> None:
    with pytest.raises(ValueError, match="every row needs 2 cells"):
        Table("t", (Column("a"), Column("b")), (("1",),))
    with pytest.raises(ValueError, match="values and rows differ"):
        Table("t", (Column("a"),), (("1",),), ())


def comm_bench():
    m = []
    for backend, scale in (("gloo", 1.0), ("mpi", 2.0)):
        for nbytes in (1000, 1_000_000):
            t = (10e-6 + nbytes * 1e-9) * scale
            m.append({"backend": backend, "op": "all_reduce", "nbytes": nbytes,
                      "count": nbytes // 4, "times_s": [t * 0.5, t * 1.5]})  # fmt: skip
    m.append({"backend": "gloo", "op": "sendrecv", "nbytes": 8, "count": 2, "error": "boom"})
    raw = {"world_size": 4, "dtype": "float32", "iters": 2, "warmup": 1, "measurements": m}
    return comm_results(raw, {"nccl": "no CUDA device"})


def test_comm_says_the_same_on_the_terminal_and_the_page() -> None:
    bench = comm_bench()
    doc = comm_document(bench)
    text, page = terminal_text(doc), document_html(doc)
    big = next(r for r in bench.rows if r.backend == "gloo" and r.nbytes == 1_000_000)
    for shown in ("1,000,000", f"{big.time_avg_us:,.2f}", f"{big.busbw_gbps:.3f}", "boom",
                  "no CUDA device", "α-β fit", "OSU-style AllReduce", "time avg (µs)"):  # fmt: skip
        assert shown in text, shown
        assert html.escape(shown) in page, shown
    assert all(f'id="{chart_id}"' in page for chart_id in COMM_CHART_IDS)
    tables = [b for b in doc.blocks if isinstance(b, Table)]
    gloo = next(t for t in tables if t.title == "all_reduce on gloo")
    assert gloo.values[1][0] == 1_000_000
    assert gloo.values[1][5] == pytest.approx(1010.0)
    assert "failed sendrecv on gloo at 8 B: boom" in text


def test_byte_sizes_are_exact_on_the_terminal_and_readable_on_the_page() -> None:
    size = Column("size", "B", byte_size=True)
    table = Table("t", (Column("op", align="left"), size), (("all_reduce", "4,194,304"),),
                  (("all_reduce", 4 * 2**20),))  # fmt: skip
    doc = Document("d", (table,))
    text, page = terminal_text(doc), document_html(doc)
    assert "size (B)" in text and "4,194,304" in text and "MiB" not in text
    assert "<th>size</th>" in page and '<td class="num">4.00 MiB</td>' in page
    assert "4,194,304" not in page
    with pytest.raises(ValueError, match="byte-size column needs values"):
        Table("t", (size,), (("1",),))


def test_row_groups_and_the_caption_on_every_renderer() -> None:
    rows = (("0", "data"), ("", "forward"), ("1", "data"))
    cols = (Column("rank", align="left"), Column("phase", align="left"))
    table = Table("phases", cols, rows, groups=(2, 1), caption=f"note {HOSTILE}")
    doc = Document("d", (table,))
    text, page = terminal_text(doc), document_html(doc)
    lines = text.splitlines()
    forward = next(i for i, line in enumerate(lines) if "forward" in line)
    assert lines[forward + 1].startswith("├")
    assert lines[forward + 4].startswith("note") and "[bold]&" in text  # under the table
    assert page.count("<tbody>") == 2 and html.escape(f"note {HOSTILE}") in page
    with pytest.raises(ValueError, match="groups do not add up"):
        Table("t", cols, rows, groups=(2,))


def test_a_traceback_is_cut_on_the_terminal_only_and_ids_reach_the_page() -> None:
    lines = tuple(f"frame {i}" for i in range(6))
    pre = Preformatted(lines, styles=("bold",) + ("",) * 5, tail=2, html_id="trace")
    doc = Document("d", (Heading("title", rule=True), Section("S", (pre,), html_id="s")))
    text, page = terminal_text(doc), document_html(doc)
    assert text.splitlines()[0].startswith("─") and " title " in text.splitlines()[0]
    assert "frame 3" not in text and "frame 4\nframe 5" in text
    assert '<section id="s">' in page and '<pre id="trace">frame 0\nframe 1' in page
    assert "frame 5</pre>" in page


def test_a_titled_grid_sits_under_its_title_on_every_renderer() -> None:
    doc = Document("d", (Grid((("host", HOSTILE), ("cores", "2")), title="CPU"),))
    text, page = terminal_text(doc), document_html(doc)
    assert text.splitlines()[0].strip() == "CPU" and text.splitlines()[1].startswith(" host")
    assert '<table class="grid"><caption>CPU</caption>' in page and html.escape(HOSTILE) in page


def test_marked_letters_cell_styles_and_frames() -> None:
    bar = Column("phases", align="left", marks=(("d", "yellow"), ("f", "green")))
    table = Table(
        "",
        (Column("rank"), Column("status", align="left"), bar),
        (("0", "running", "ddf."), ("1", "DIED", "")),
        cell_styles=(("", "", ""), ("", "bold red", "")),
        frame="none",
    )
    doc = Document("d", (table,))
    console = Console(record=True, width=80, color_system="truecolor", force_terminal=True)
    render_document(doc, console)
    styled = console.export_text(styles=True)
    assert "\x1b[1;31mDIED" in styled and "\x1b[33mdd" in styled and "\x1b[32mf" in styled
    plain = terminal_text(doc).splitlines()
    assert plain[0].split() == ["rank", "status", "phases"] and "│" not in "".join(plain)
    page = document_html(doc)
    assert '<td class="bold red">DIED</td>' in page
    assert '<span class="yellow">dd</span><span class="green">f</span>.</td>' in page
    with pytest.raises(ValueError, match="cell styles and rows differ"):
        Table("t", (Column("a"),), (("1",),), cell_styles=())


def test_a_cell_of_several_lines_and_a_card_section_on_the_page() -> None:
    table = Table("w", (Column("finding", align="left"),), ((f"{HOSTILE}\nremedy: x",),))
    doc = Document("d", (Section("Summary", (table, Line("")), html_class="card"),))
    page = document_html(doc)
    assert f"<td>{html.escape(HOSTILE)}<br>remedy: x</td>" in page
    assert '<section class="card"><h2>Summary</h2>' in page and "<p></p>" not in page


def test_a_document_as_one_renderable_prints_as_the_document_does() -> None:
    doc = every_kind()
    console = Console(record=True, width=200, markup=False, highlight=False)
    console.print(document_renderable(doc))
    assert console.export_text() == terminal_text(doc)


def test_a_line_goes_on_in_runs_of_their_own_style() -> None:
    line = Line("phases: ", after=(("d data  ", "yellow"), (HOSTILE, "")))
    doc = Document("d", (line,))
    console = Console(record=True, width=200, color_system="truecolor", force_terminal=True)
    render_document(doc, console)
    assert "phases: \x1b[33md data  \x1b[0m" in console.export_text(styles=True)
    assert terminal_text(doc).strip() == f"phases: d data  {HOSTILE}".strip()
    page = document_html(doc)
    assert f'<p>phases: <span class="yellow">d data  </span>{html.escape(HOSTILE)}</p>' in page
