"""What users mistype is caught before anything starts: one line, exit code 2.

Every command that starts ranks gets a misspelled option, an option of another command and
a bracketed, non-ASCII path; arguments after the script still reach the script untouched.
Refusals that import torch first run in this process (a new interpreter each costs ~10 s here).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import DDP_TRAIN, scalescope, scalescope_in_process

ODD = "dätä[1]"
"""A path with rich markup brackets and a non-ASCII letter: it must print verbatim."""


def refused(proc: subprocess.CompletedProcess) -> str:
    """The one error line of a refused command."""
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


MISSPELLED = [
    ("run", ["--run-dri", "x", str(DDP_TRAIN)], "--run-dri", "--run-dir"),
    ("bench", ["resnet18", "--bach-size", "8"], "--bach-size", "--batch-size"),
    ("scale", ["--ranks", "1,2", "--bench", "resnet18", "--stesp", "3"], "--stesp", "--steps"),
    ("tune", ["--trails", "3", str(DDP_TRAIN)], "--trails", "--trials"),
    ("suite", ["--quikc"], "--quikc", "--quick"),
    ("comm", ["--sizes", "8:1K", "--iter", "3"], "--iter", "--iters"),
]


@pytest.mark.parametrize(("command", "args", "wrong", "meant"), MISSPELLED)
def test_misspelled_option_names_the_closest(
    tmp_path: Path, command: str, args: list[str], wrong: str, meant: str
) -> None:
    line = refused(scalescope(command, *args, cwd=tmp_path))
    assert line == (
        f"error: unknown option {wrong} for {command}; did you mean {meant}? "
        f"(see scalescope {command} --help)"
    )
    assert not (tmp_path / "scalescope_runs").exists()


FOREIGN = [
    ("run", ["--ranks", "1,2", str(DDP_TRAIN)], "--ranks", "analyze, report, scale, suite"),
    ("bench", ["resnet18", "--trials", "3"], "--trials", "tune"),
    ("scale", ["--ranks", "1", "--bench", "resnet18", "--trials", "3"], "--trials", "tune"),
    ("tune", ["--ranks", "1,2", str(DDP_TRAIN)], "--ranks", "analyze, report, scale, suite"),
    ("suite", ["--quick", "--trials", "3"], "--trials", "tune"),
    ("comm", ["--model", "x"], "--model", None),
]


@pytest.mark.parametrize(("command", "args", "option", "owners"), FOREIGN)
def test_option_of_another_command_says_whose(
    tmp_path: Path, command: str, args: list[str], option: str, owners: str | None
) -> None:
    line = refused(scalescope(command, *args, cwd=tmp_path))
    assert line.startswith(f"error: unknown option {option} for {command}")
    if owners:
        assert f"(an option of {owners})" in line


ODD_PATHS = [
    ("run", ["-n", "1", f"{ODD}.py"], f"script not found: {ODD}.py"),
    ("bench", ["resnet18", "--data", ODD], f"--data {ODD}: does not exist"),
    ("scale", ["--ranks", "1", f"{ODD}.py"], f"script not found: {ODD}.py"),
    ("tune", [f"{ODD}.py"], f"script not found: {ODD}.py"),
    ("suite", ["--quick", "--workloads", ODD], f"unknown workload '{ODD}'"),
    ("comm", ["--nccl-tests", f"{ODD}.txt"], f"{ODD}.txt: cannot read"),
]


@pytest.mark.parametrize(("command", "args", "expected"), ODD_PATHS)
def test_bracketed_non_ascii_path_prints_verbatim(
    tmp_path: Path, command: str, args: list[str], expected: str
) -> None:
    assert expected in refused(scalescope_in_process(command, *args, cwd=tmp_path))


@pytest.mark.parametrize(
    ("command", "old", "args", "holder"),
    [
        ("scale", "--study-dir", ["--ranks", "1", "--bench", "resnet18"], "scale.json"),
        ("suite", "--suite-dir", ["--quick"], "suite.json"),
    ],
)
def test_run_dir_everywhere_old_names_kept(
    tmp_path: Path, command: str, old: str, args: list[str], holder: str
) -> None:
    """The directory a command writes is --run-dir; the old name still means the same."""
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / holder).write_text("{}")
    for flag in ("--run-dir", old):
        line = refused(scalescope_in_process(command, *args, flag, taken, cwd=tmp_path))
        assert "already holds" in line and "--run-dir" in line, line


def test_arguments_after_the_script_go_to_it_untouched(tmp_path: Path) -> None:
    script = tmp_path / "echo_args.py"
    script.write_text("import sys\nprint('ARGS', sys.argv[1:])\n")
    passed = ["--ranks", "1,2", "--run-dri", ODD, "--", "-n"]
    proc = scalescope(
        "run", "--no-probe", "--no-report", "--run-dir", tmp_path / "r", script, *passed,
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert f"ARGS {passed!r}" in proc.stdout


def test_top_of_a_directory_without_a_run_is_one_line(tmp_path: Path) -> None:
    line = refused(scalescope_in_process("top", ODD, cwd=tmp_path))
    assert line == f"error: {ODD} is not a scalescope run directory (no run.json)"
    line = refused(scalescope_in_process("top", "--onse", ODD, cwd=tmp_path))
    assert "unknown option --onse for top; did you mean --once?" in line


def test_top_needs_one_source_and_a_store_that_answers(tmp_path: Path) -> None:
    line = refused(scalescope_in_process("top", cwd=tmp_path))
    assert line == "error: give a run directory or --connect HOST:PORT (one of them)"
    line = refused(scalescope_in_process("top", ODD, "--connect", "h:1", cwd=tmp_path))
    assert line == "error: give a run directory or --connect HOST:PORT (one of them)"
    line = refused(scalescope_in_process("top", "--connect", "nohost", cwd=tmp_path))
    assert line == "error: --connect takes HOST:PORT of the job's store, got 'nohost'"
    import socket

    from scalescope.launch.channel.seals import load_key

    load_key()  # the store is asked only with a key
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    line = refused(scalescope_in_process("top", "--connect", f"127.0.0.1:{port}", cwd=tmp_path))
    assert (
        line == f"error: no store answers at 127.0.0.1:{port}: nothing listens at 127.0.0.1:{port}"
    )


def test_the_live_channels_key_file_is_checked_before_anything_starts(tmp_path, monkeypatch):
    """`top --connect` without the key, and a run over several nodes or a task srun started
    whose key others can read (the states and requests in the job's store are sealed with
    it)."""
    key = tmp_path / "key"
    monkeypatch.setenv("SCALESCOPE_KEY_FILE", str(key))
    line = refused(scalescope_in_process("top", "--connect", "127.0.0.1:1", cwd=tmp_path))
    assert line.startswith(f"error: no key file at {key}: ")
    key.write_bytes(b"k" * 32)
    key.chmod(0o644)
    run = ["run", "--nnodes", "2", "--rdzv-endpoint", "127.0.0.1:1", "--run-dir", "r", DDP_TRAIN]
    line = refused(scalescope_in_process(*run, cwd=tmp_path))
    assert line == f"error: the key file {key} can be read by others (mode 0644): chmod 600 {key}"
    assert not (tmp_path / "r").exists(), "refused before the run directory"
    from test_launch_cluster import slurm_env

    for name, value in slurm_env(0, 2, "localhost", "4242").items():
        if name.startswith("SLURM_"):
            monkeypatch.setenv(name, value)
    task = refused(scalescope_in_process("run", "--run-dir", "r", DDP_TRAIN, cwd=tmp_path))
    assert task == line, "a task srun started, before its rank"
    assert not (tmp_path / "r").exists()
