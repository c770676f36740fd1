"""One result per check line, and the files they are written to (gpu-check.json, .md)."""

from __future__ import annotations

import json
import platform
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

PASS, FAIL, SKIP, INFO = "PASS", "FAIL", "SKIP", "INFO"
"""INFO: a figure we want to know, not a pass/fail (the projection's error on real hardware)."""
SCHEMA = "scalescope.gpu-check/1"


@dataclass(frozen=True)
class CheckResult:
    check: str
    """``2.clock``: the issue's check number, then what is compared."""
    status: str
    figure: str = ""
    """The measured numbers with their units and the limit they were held to."""
    reason: str = ""
    """Why a check was skipped or failed to run."""
    data: dict[str, Any] = field(default_factory=dict)
    """The raw figures, for programs."""

    def line(self) -> str:
        status = f"SKIP ({self.reason})" if self.status == SKIP else self.status
        tail = self.figure or ("" if self.status == SKIP else self.reason)
        return f"{self.check:<18} {status}" + (f"  {tail}" if tail else "")


def verdict(check: str, ok: bool, figure: str, **data: Any) -> CheckResult:
    return CheckResult(check, PASS if ok else FAIL, figure, data=data)


def skip(check: str, reason: str) -> CheckResult:
    return CheckResult(check, SKIP, reason=reason)


def failed_to_run(check: str, error: str) -> CheckResult:
    return CheckResult(check, FAIL, reason=f"did not run: {error}")


def summary(results: list[CheckResult]) -> dict[str, int]:
    counts = {s: 0 for s in (PASS, FAIL, SKIP, INFO)}
    for r in results:
        counts[r.status] += 1
    return counts


def to_json(results: list[CheckResult], machine: dict[str, Any], mode: str) -> str:
    doc = {
        "schema": SCHEMA,
        "mode": mode,
        "machine": machine,
        "summary": summary(results),
        "checks": [asdict(r) for r in results],
    }
    return json.dumps(doc, indent=2, default=str) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(results: list[CheckResult], machine: dict[str, Any], mode: str, date: str) -> str:
    gpu = machine.get("gpu") or "no CUDA device"
    counts = summary(results)
    lines = [
        f"# gpu-check ({mode}), {date}",
        "",
        f"Machine: {gpu}; {machine.get('cores')} cores; torch {machine.get('torch')}; "
        f"{platform.python_implementation()} {platform.python_version()}.",
        "",
        ", ".join(f"{n} {s}" for s, n in counts.items()),
        "",
        "| check | result | figure / reason |",
        "|---|---|---|",
    ]
    for r in results:
        lines.append(f"| {r.check} | {r.status} | {_cell(r.figure or r.reason)} |")
    return "\n".join(lines) + "\n"


def write_outputs(
    out: Path, results: list[CheckResult], machine: dict[str, Any], mode: str, date: str
) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out / "gpu-check.json", out / "gpu-check.md"
    json_path.write_text(to_json(results, machine, mode))
    md_path.write_text(to_markdown(results, machine, mode, date))
    return [json_path, md_path]
