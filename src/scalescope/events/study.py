"""A scaling study: the same workload run at several sizes, one run directory each.

``STUDY_DIR/scale.json`` lists the points; each point's ``run_dir`` (relative to the study
directory) is an ordinary run directory that ``load_run`` reads. `scale` writes it;
`project --validate` and the dashboard read it.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from scalescope.events.files import SCALE_STUDY_FILE
from scalescope.events.run import write_json_atomic

STUDY_SCHEMA = "scalescope.scale/1"


class ScalePoint(msgspec.Struct, kw_only=True):
    """One size of the study."""

    ranks: int
    nodes: int = 1
    ranks_per_node: int = 0
    threads_per_rank: int = 0
    per_rank_batch: int | None = None
    run_dir: str = ""
    """Relative to the study directory."""
    status: str = "ok"
    """ok or failed (the run's own status, or why it could not start)."""
    error: str | None = None
    samples_per_s: float | None = None
    step_ms: float | None = None
    oversubscribed: bool = False
    """ranks × threads exceeded the cores of the node."""


class ScaleStudy(msgspec.Struct, kw_only=True):
    schema: str = STUDY_SCHEMA
    mode: str = "weak"
    """weak (same per-rank batch at every size) or strong (same global batch)."""
    command: list[str] = msgspec.field(default_factory=list)
    workload: str = ""
    points: list[ScalePoint] = msgspec.field(default_factory=list)


def save_study(study: ScaleStudy, study_dir: Path) -> Path:
    return write_json_atomic(study_dir / SCALE_STUDY_FILE, study)


def load_study(study_dir: Path) -> ScaleStudy:
    """The study in STUDY_DIR; a missing or malformed scale.json is a ValueError naming it."""
    path = study_dir / SCALE_STUDY_FILE
    try:
        return msgspec.json.decode(path.read_bytes(), type=ScaleStudy)
    except FileNotFoundError as exc:
        msg = f"{study_dir}: no {SCALE_STUDY_FILE} (not a scalescope scale study)"
        raise ValueError(msg) from exc
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ValueError(f"{path}: malformed scale study ({exc})") from exc
