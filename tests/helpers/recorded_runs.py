"""Test helper (not a test module): the real runs recorded once under ``tests/data/runs/``
(by ``tests/data/record.py``) and what their report says, for exact checks that cannot flake.

Each scenario is a folder: ``run/`` (the run directory as ``scalescope`` wrote it),
``scenario.json`` (what was run, the report's options and the truth measured beside it while
recording) and the report recorded from it: ``report.txt`` (``scalescope report`` as a pipe
prints it) and ``expected.json`` (its diagnosis, from ``report --json``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

RUNS = Path(__file__).resolve().parents[1] / "data" / "runs"
SCENARIO_FILE = "scenario.json"
REPORT_FILE = "report.txt"
EXPECTED_FILE = "expected.json"
RUNS_TOKEN = "{runs}"
"""Stands for ``RUNS`` in a scenario's report options (``--baseline {runs}/balanced/run``)."""


@dataclass(frozen=True)
class Scenario:
    name: str
    about: str
    command: list[str]
    truth: dict[str, Any]
    report_args: list[str] = field(default_factory=list)
    recorded: str = ""
    """Date of the recording (ISO)."""

    @property
    def folder(self) -> Path:
        return RUNS / self.name

    @property
    def run_dir(self) -> Path:
        return self.folder / "run"

    def options(self) -> list[str]:
        return [a.replace(RUNS_TOKEN, str(RUNS)) for a in self.report_args]


def scenario_names() -> list[str]:
    return sorted(p.parent.name for p in RUNS.glob(f"*/{SCENARIO_FILE}"))


def load_scenario(name: str) -> Scenario:
    data = json.loads((RUNS / name / SCENARIO_FILE).read_text())
    return Scenario(name=name, **data)


def save_scenario(s: Scenario) -> None:
    data = {
        "about": s.about,
        "recorded": s.recorded,
        "command": s.command,
        "report_args": s.report_args,
        "truth": s.truth,
    }
    s.folder.mkdir(parents=True, exist_ok=True)
    (s.folder / SCENARIO_FILE).write_text(json.dumps(data, indent=2) + "\n")


@dataclass(frozen=True)
class Report:
    text: str
    """What ``scalescope report RUN_DIR`` printed: the paths it shows are those recorded in the
    run (where it was made), whatever folder the tests run from."""
    diagnosis: dict[str, Any]
    exit_code: int


def report_of(s: Scenario) -> Report:
    """``scalescope report`` of a recorded run with the scenario's options, run in this
    process by typer's runner (the command a user types, without a new interpreter); its
    output is not a terminal, so the report is ``REPORT_WIDTH`` wide, as in a pipe."""
    from typer.testing import CliRunner

    from scalescope.cli import app

    with TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        args = ["report", str(s.run_dir), *s.options(), "--json", str(out)]
        result = CliRunner().invoke(app, args)
        diagnosis = json.loads(out.read_text())["diagnosis"] if out.exists() else {}
    return Report(result.stdout, diagnosis, result.exit_code)


def recorded_report(s: Scenario) -> Report:
    """The report stored beside the run when it was recorded (or last accepted)."""
    expected = json.loads((s.folder / EXPECTED_FILE).read_text())
    return Report(
        (s.folder / REPORT_FILE).read_text(), expected["diagnosis"], expected["exit_code"]
    )


def store_report(s: Scenario, report: Report) -> None:
    (s.folder / REPORT_FILE).write_text(report.text)
    expected = {"exit_code": report.exit_code, "diagnosis": report.diagnosis}
    text = json.dumps(expected, indent=2, sort_keys=True) + "\n"
    (s.folder / EXPECTED_FILE).write_text(text)


def first_finding(report: Report) -> dict[str, Any]:
    findings = report.diagnosis["findings"]
    assert findings, "no finding"
    return findings[0]
