"""`scalescope report --timeline --ranks` through the CLI: a bad value or --ranks without
--timeline is a one-line error with exit code 2 before any analysis; the default trace of a
64-rank run holds 13 ranks."""

from __future__ import annotations

import json

import pytest
from many_ranks import write_many_ranks_run

from conftest import scalescope, scalescope_in_process


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return write_many_ranks_run(tmp_path_factory.mktemp("r") / "run", 64, 20, slow={13: 1.3})


def error_lines(done) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.strip()]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--ranks", "0,worst:x"), "error: --ranks '0,worst:x': 'worst:x' is not a rank N"),
        (("--ranks", "9-2"), "error: --ranks '9-2': range 9-2 ends before it starts"),
        (("--ranks", "1"), None),  # no --timeline
    ],
)
def test_bad_ranks_is_one_line(run_dir, tmp_path, args, message):
    timeline = () if message is None else ("--timeline", str(tmp_path / "t.json"))
    done = scalescope_in_process("report", run_dir, *timeline, *args, cwd=tmp_path)
    assert done.returncode == 2
    lines = error_lines(done)
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(message or "error: --ranks selects the ranks of the --timeline")
    assert "scalescope report" not in done.stdout  # failed before the report
    assert not (tmp_path / "t.json").exists()


def test_rank_not_in_run_fails(run_dir, tmp_path):
    out = tmp_path / "t.json"
    done = scalescope("report", run_dir, "--timeline", out, "--ranks", "64", cwd=tmp_path)
    assert done.returncode == 2
    assert "error: --ranks '64': rank 64 is not in this run (ranks 0-63)" in done.stderr


def test_default_and_chosen_ranks(run_dir, tmp_path):
    out = tmp_path / "t.json"
    done = scalescope("report", run_dir, "--timeline", out, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    meta = json.loads(out.read_text())["metadata"]["ranks"]
    assert len(meta["shown"]) == 13 and 0 in meta["shown"] and 13 in meta["shown"]
    done = scalescope("report", run_dir, "--timeline", out, "--ranks", "worst:1,5-6", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text())["metadata"]["ranks"]["shown"] == [5, 6, 13]
