"""Names holding rich markup (``[x]``, ``[/]``) print exactly as given: a script path and a run
directory go through run, report and error paths; ``[/]`` used to crash the printer."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import DDP_TRAIN, scalescope, scalescope_in_process

SCRIPT = "s[x][/]t.py"
"""A folder ``s[x][`` holding ``]t.py``: ``/`` cannot be part of one file name."""
RUN_DIR = "r[3][/]d"
HTML = "h[x][/]o.html"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """One 2-rank run of a script whose path holds markup, into a run directory that does."""
    cwd = tmp_path_factory.mktemp("verbatim")
    (cwd / SCRIPT).parent.mkdir()
    shutil.copy(DDP_TRAIN, cwd / SCRIPT)
    proc = scalescope("run", "-n", "2", "--run-dir", RUN_DIR, SCRIPT, "--steps", "2", cwd=cwd)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return cwd, proc


@pytest.mark.heavy
def test_run_prints_the_names_exactly(recorded):
    cwd, proc = recorded
    assert f"run completed: {RUN_DIR}  (scalescope report {RUN_DIR})" in proc.stderr
    assert f"scalescope run -n 2 --run-dir {RUN_DIR} {SCRIPT} --steps 2" in proc.stdout
    assert (cwd / RUN_DIR / "run.json").exists()


@pytest.mark.heavy
def test_report_prints_the_names_exactly(recorded):
    cwd, _ = recorded
    Path(cwd / HTML).parent.mkdir(exist_ok=True)
    proc = scalescope("report", RUN_DIR, "--html", HTML, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    assert f"--run-dir {RUN_DIR} {SCRIPT} --steps 2" in proc.stdout
    assert proc.stderr.strip() == f"wrote {HTML}"
    assert (cwd / HTML).stat().st_size > 0


@pytest.mark.heavy
def test_errors_print_the_names_exactly(recorded):
    cwd, _ = recorded
    proc = scalescope_in_process("report", "missing[x][/]d", cwd=cwd)
    assert proc.returncode == 2
    assert proc.stderr == (
        "error: missing[x][/]d is not a scalescope run directory (no run.json)\n"
    )
    proc = scalescope_in_process(
        "run", "-n", "2", "--run-dir", RUN_DIR, SCRIPT, "--steps", "2", cwd=cwd
    )
    assert proc.returncode == 2
    assert proc.stderr == (
        f"error: run directory {RUN_DIR} already holds a run; choose another --run-dir\n"
    )
    assert (cwd / RUN_DIR / "run.json").exists(), "the recorded run is kept"


FAILING = """
import sys
import torch.distributed as dist

dist.init_process_group("gloo")
if dist.get_rank() == 1:
    raise RuntimeError(f"bad value {sys.argv[1]} in [/]config[0]")
dist.destroy_process_group()
"""
ARG = "--lr=[0.1][/]"


@pytest.mark.heavy
def test_a_script_argument_and_a_ranks_error_print_exactly(tmp_path):
    (tmp_path / "fail.py").write_text(FAILING)
    proc = scalescope("run", "-n", "2", "--run-dir", "run", "fail.py", ARG, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert f"scalescope run -n 2 --run-dir run fail.py {ARG}" in proc.stdout
    assert f"RuntimeError: bad value {ARG} in [/]config[0]" in proc.stdout
    assert "run failed: run" in proc.stderr
