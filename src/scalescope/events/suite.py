"""A suite's record: one entry per workload and rank count, each with its run directory.

``SUITE_DIR/suite.json`` (schema ``scalescope.suite/1``, docs/suite.md) is written by `suite`,
copied to its ``--json`` file, and read back by `report SUITE_DIR`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import msgspec

from scalescope.events.files import SUITE_FILE

SUITE_SCHEMA = "scalescope.suite/1"


@dataclass(frozen=True)
class RankSplit:
    """Where one rank's window went (analyze.steps.rank_split measures it)."""

    rank: int
    steps: int
    """Measured steps in the window; 0 for a loop without steps."""
    window_s: float
    collective_s: float
    """Time with at least one collective in flight (union of intervals)."""
    data_s: float
    """Time in the DataLoader (data phases)."""

    @property
    def collective_pct(self) -> float | None:
        return 100.0 * self.collective_s / self.window_s if self.window_s > 0 else None

    @property
    def data_pct(self) -> float | None:
        return 100.0 * self.data_s / self.window_s if self.window_s > 0 else None


@dataclass(frozen=True)
class SuiteEntry:
    """One workload at one rank count."""

    workload: str
    family: str
    ranks: int
    size: int
    run_dir: str
    status: str
    """completed, failed, interrupted, or not run (the launcher refused it)."""
    error: str | None
    wall_s: float | None
    """The run from launch to the last rank's exit."""
    time_s: float | None
    """The workload's measured part, as it timed itself."""
    throughput: float | None
    unit: str | None
    """What throughput counts per second: images, tokens, rows."""
    per_rank: tuple[RankSplit, ...]
    efficiency: float | None = None
    """Scaling efficiency against the same workload at the fewest ranks (1.0 = linear)."""


@dataclass(frozen=True)
class SuiteResult:
    """The result in a suite directory, beside its runs' directories."""

    suite_dir: str
    quick: bool
    command: tuple[str, ...]
    entries: tuple[SuiteEntry, ...]
    interrupted: bool


def _entry_json(e: SuiteEntry) -> dict:
    doc = msgspec.to_builtins(e)
    doc["throughput_unit"] = f"{e.unit}/s" if e.unit else None
    doc["per_rank"] = [
        {**msgspec.to_builtins(r), "collective_pct": r.collective_pct, "data_pct": r.data_pct}
        for r in e.per_rank
    ]
    return doc


def suite_json(result: SuiteResult) -> bytes:
    """The result as JSON with its schema version first; None fields become ``null``; the
    derived shares (throughput unit, per-rank percentages) beside the fields for readers."""
    body = msgspec.to_builtins(result)
    body["entries"] = [_entry_json(e) for e in result.entries]
    document = {"schema": SUITE_SCHEMA, **body}
    return msgspec.json.format(msgspec.json.encode(document), indent=2) + b"\n"


def save_suite(result: SuiteResult, *paths: Path | None) -> list[Path]:
    """The same JSON into each path given (suite.json, the ``--json`` copy); the paths written."""
    data = suite_json(result)
    written = []
    for path in paths:
        if path is not None:
            path.write_bytes(data)
            written.append(path)
    return written


def load_suite(path: Path) -> SuiteResult:
    """The result in suite directory ``path`` (its suite.json), or in the JSON file ``path``
    (suite.json or a copy written by ``--json``); ValueError naming the file otherwise."""
    file = path / SUITE_FILE if path.is_dir() else path
    try:
        body = msgspec.json.decode(file.read_bytes())
    except FileNotFoundError:
        raise ValueError(f"{path}: no {SUITE_FILE} (not a scalescope suite)") from None
    except (OSError, msgspec.DecodeError) as exc:
        raise ValueError(f"{file}: not a suite result ({exc})") from None
    if not isinstance(body, dict) or body.get("schema") != SUITE_SCHEMA:
        raise ValueError(f"{file}: not a suite result (no schema {SUITE_SCHEMA!r})")
    try:
        return msgspec.convert(body, SuiteResult)
    except msgspec.ValidationError as exc:
        raise ValueError(f"{file}: malformed suite result ({exc})") from None
