"""`--label-output` and `--ranks-output`: the ranks' lines on the terminal, whole and labelled,
or only rank 0's, with every rank's kept in RUN_DIR/logs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import scalescope, scalescope_in_process

LINES = 300
CHATTY = f"""
import os, sys
rank = os.environ["RANK"]
for i in range({LINES}):
    sys.stdout.write(f"rank {{rank}} line {{i}} " + "x" * 300 + " end\\n")
    sys.stdout.flush()
"""
"""Both ranks write long lines as fast as they can, flushing each: unlabelled, the
terminal gets them interleaved mid-line."""


def chatty(tmp_path: Path) -> Path:
    script = tmp_path / "chatty.py"
    script.write_text(CHATTY)
    return script


def whole_lines(text: str, rank: int) -> list[str]:
    pattern = re.compile(rf"^\[rank {rank}\] rank {rank} line (\d+) x{{300}} end$")
    return [m.group(1) for line in text.splitlines() if (m := pattern.match(line))]


@pytest.mark.heavy
def test_label_output_keeps_lines_whole(tmp_path: Path) -> None:
    proc = scalescope("run", "-n", "2", "--no-probe", "--no-report", "--label-output",
                      "--run-dir", tmp_path / "r", chatty(tmp_path), cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    for rank in (0, 1):
        assert whole_lines(proc.stdout, rank) == [str(i) for i in range(LINES)]
    ours = [line for line in proc.stdout.splitlines() if "line" in line]
    assert len(ours) == 2 * LINES  # nothing cut or glued: every line is one whole line


@pytest.mark.heavy
def test_ranks_output_shows_rank_0_and_keeps_all(tmp_path: Path) -> None:
    proc = scalescope("run", "-n", "2", "--no-probe", "--no-report", "--ranks-output", "0",
                      "--run-dir", tmp_path / "r", chatty(tmp_path), cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("rank 0 line") == LINES
    assert "rank 1 line" not in proc.stdout
    kept = {p.parent.name: p.read_text() for p in (tmp_path / "r" / "logs").rglob("stdout.log")}
    assert sorted(kept) == ["0", "1"]
    assert kept["1"].count("rank 1 line") == LINES


def test_ranks_output_beyond_the_world_is_refused(tmp_path: Path) -> None:
    proc = scalescope_in_process(
        "run", "-n", "2", "--ranks-output", "5", "--run-dir", tmp_path / "r", chatty(tmp_path),
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: --ranks-output 5: the run has ranks 0..1"
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    ("given", "why"),
    [(",", "takes ranks like 0 or 0,3, got ','"), ("x", "takes ranks like 0 or 0,3, got 'x'"),
     ("0,-1", "takes ranks >= 0, got 0,-1")],
)  # fmt: skip
def test_ranks_output_not_ranks_is_refused(tmp_path: Path, given: str, why: str) -> None:
    proc = scalescope_in_process("run", "-n", "2", "--ranks-output", given, chatty(tmp_path),
                                 cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"error: --ranks-output {why}"
