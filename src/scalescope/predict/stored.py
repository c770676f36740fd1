"""The projection `scalescope project RUN_DIR` stored in the run directory
(``projection.json``, the ``scalescope.project/1`` JSON of `project --json`), read back for the
run's dashboard."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import msgspec

from scalescope.events.files import PROJECTION_FILE


class StoredPoint(msgspec.Struct, kw_only=True):
    """One projected size, as the dashboard needs it."""

    nodes: int
    ranks: int
    global_batch: float
    step_ms: float
    band_ms: float
    samples_per_s: float
    dominant: str


class StoredProjection(msgspec.Struct, kw_only=True):
    """The part of ``scalescope.project/1`` the dashboard shows (other fields are ignored)."""

    schema: str
    mode: str
    hardware: str
    ranks_per_node: int
    algorithm: str
    points: list[StoredPoint]
    notes: list[str] = msgspec.field(default_factory=list)


@dataclass(frozen=True)
class DashboardProjection:
    """The run's stored projection, or why it could not be read."""

    projection: StoredProjection | None
    problem: str = ""


def decode_projection(data: bytes) -> StoredProjection:
    return msgspec.json.decode(data, type=StoredProjection)


def stored_projection(run_dir: Path) -> DashboardProjection | None:
    """The projection stored in ``run_dir``; None when `project` never stored one (or the
    run is another tool's trace file)."""
    path = Path(run_dir) / PROJECTION_FILE
    try:
        projection = decode_projection(path.read_bytes())
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (OSError, msgspec.DecodeError, msgspec.ValidationError) as exc:
        return DashboardProjection(None, f"{path} could not be read: {exc}")
    if not projection.points:
        return DashboardProjection(None, f"{path} holds no projected size")
    return DashboardProjection(projection)
