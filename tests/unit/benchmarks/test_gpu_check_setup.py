"""gpu_check's own setup and options: into the project's venv once, offline from a wheel
directory, and a clear error for a check number that does not exist."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
import gpu_check  # noqa: E402
from gpucheck import setup_env  # noqa: E402


def test_pip_goes_offline_with_a_wheel_directory(tmp_path):
    env = setup_env.pip_env(tmp_path)
    assert env["PIP_FIND_LINKS"] == str(tmp_path) and env["PIP_NO_INDEX"] == "1"
    assert setup_env.pip_env(None) == dict(os.environ)


def test_a_venv_is_ready_when_it_imports_scalescope_and_torch(tmp_path):
    assert not setup_env.venv_ready(tmp_path / "bin" / "python")
    assert setup_env.venv_ready(Path(sys.executable))  # this test's own interpreter


def test_inside_the_venv_nothing_is_set_up_again(monkeypatch):
    monkeypatch.setenv(setup_env.MARK, "1")
    monkeypatch.setattr(setup_env.os, "execv", lambda *a: pytest.fail("re-executed"))
    setup_env.ensure_venv(["gpu_check.py"], None)


def test_only_takes_check_numbers():
    assert gpu_check.only_checks(None) == (1, 2, 3, 4, 5, 6, 7)
    assert gpu_check.only_checks("6,2") == (6, 2)
    with pytest.raises(ValueError, match="among 1-7, got '2,8'"):
        gpu_check.only_checks("2,8")


def test_bad_only_is_a_one_line_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        gpu_check.parse(["--only", "9"])
    assert exit_info.value.code == 2
    assert "--only takes check numbers among 1-7, got '9'" in capsys.readouterr().err


def test_out_wins_over_out_option(monkeypatch, tmp_path):
    args = gpu_check.parse(["--out", str(tmp_path / "o")])
    monkeypatch.setenv("OUT", str(tmp_path / "env"))
    assert gpu_check.output_dir(args, tmp_path / "w") == tmp_path / "env"
    monkeypatch.delenv("OUT")
    assert gpu_check.output_dir(args, tmp_path / "w") == tmp_path / "o"
    assert gpu_check.output_dir(gpu_check.parse([]), tmp_path / "w") == tmp_path / "w"
