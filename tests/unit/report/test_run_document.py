"""The run report built once: the terminal and the dashboard show the same failure lines and
the same by-size cells (sizes exact on one, readable on the other), and the document's JSON
keeps the numbers."""

from __future__ import annotations

import io
import re

from report_runs import ALLREDUCE_MS, BUCKET, STEPS, build
from rich.console import Console
from test_html import dashboard_page

from scalescope.events import RankMeta, load_run
from scalescope.report.document import Section, Table
from scalescope.report.views.run import run_document
from scalescope.report.views.run_terminal import render_terminal


def terminal(analysis) -> str:
    console = Console(file=io.StringIO(), width=160, color_system=None)
    render_terminal(analysis, console)
    return console.file.getvalue()


def failed_run(tmp_path):
    error = "Traceback:\n" + "\n".join(f"  frame {i}" for i in range(9)) + "\nValueError: boom"
    failed = RankMeta(rank=3, hostname="node-1", status="failed", exit_code=1, error=error)
    analysis = build(tmp_path, status="failed", rank_status={3: failed})
    return analysis, dashboard_page(analysis, load_run(tmp_path)), terminal(analysis)


def test_failure_lines_are_the_same_words_on_the_terminal_and_the_page(tmp_path):
    analysis, page, text = failed_run(tmp_path)
    head = "rank 3 on node-1: failed, exit code 1, 0 steps done (first to fail)"
    assert head in text and f'<p class="bold">{head}</p>' in page
    failures = page[page.index('<section id="failures">') :]
    assert "frame 0" in failures and "frame 0" not in text  # the page keeps the whole error
    assert "ValueError: boom" in text and "Run status: failed" in failures


def test_the_by_size_rows_are_the_same_cells_but_the_size(tmp_path):
    analysis, page, text = failed_run(tmp_path)
    start = page.index('<table id="sizes">')
    table = page[start : page.index("</table>", start)]
    [page_row] = [re.findall(r"<td[^>]*>(.*?)</td>", r) for r in table.split("<tr>")[2:]]
    rows = [line for line in text.splitlines() if f"{BUCKET:,}" in line and "│" in line]
    [line] = [row for row in rows if "gradients" not in row]  # not the cross-rank table's
    term_row = line.replace("│", " ").split()
    assert term_row[:2] == ["all_reduce", "4,194,304"] and page_row[1] == "4.00 MiB"
    assert page_row[0] == term_row[0] and page_row[2:] == term_row[2:]
    assert page_row[2] == str(2 * STEPS) and page_row[3] == f"{ALLREDUCE_MS * 1e3:,.1f}"


def test_the_document_holds_the_numbers_behind_the_cells(tmp_path):
    analysis = build(tmp_path)
    blocks = run_document(analysis).blocks
    sections = {b.title: b.blocks for b in blocks if isinstance(b, Section)}
    sizes = next(
        b
        for b in sections["Collectives"]
        if isinstance(b, Table) and b.title.startswith("Collectives by")
    )
    assert sizes.values[0][:3] == ("all_reduce", BUCKET, 2 * STEPS)
    assert [c.unit for c in sizes.columns[:2]] == ["", "B"]
    phases = next(
        b
        for b in sections["Throughput and step time"]
        if isinstance(b, Table) and "phases" in b.title
    )
    assert phases.groups == (7,) * 4  # 5 phases, other and step, per rank
