"""The bench's progress bar and lines print model names and lines verbatim, brackets too."""

from __future__ import annotations

import io

from rich.console import Console

from scalescope.bench.progress import Display


def test_progress_bar_and_lines_keep_brackets():
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100, color_system=None)
    with Display(True, 3, "resnet[x][/] on runs/job[3]", console=console) as display:
        assert display.progress is not None
        display.advance()
        display.progress.refresh()
        display.line("step [1/3] loss[/] 0.5")
    text = out.getvalue()
    assert "resnet[x][/] on runs/job[3]" in text
    assert "step [1/3] loss[/] 0.5" in text
    assert "1/3" in text
