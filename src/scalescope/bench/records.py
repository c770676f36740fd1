"""What a suite workload's rank 0 leaves in its run directory: time, work done, result."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import msgspec

from scalescope.events.files import BENCH_FILE, WORKLOAD_FILE
from scalescope.events.run import write_json_atomic

RUN_DIR_ENV = "SCALESCOPE_RUN_DIR"


class WorkloadRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One workload's own measurement, written by rank 0 (``workload.json``)."""

    workload: str
    world_size: int
    size: int
    """The workload's size parameter (rows, hidden size, image size)."""
    time_s: float
    """Seconds of the measured part (warm-up steps left out)."""
    items: int
    """Units of work done in ``time_s`` over all ranks."""
    unit: str
    """What ``items`` counts: rows, tokens, images."""
    options: dict[str, Any] = {}
    result: dict[str, Any] = {}
    """The fitted model or final loss, for correctness checks."""

    @property
    def throughput(self) -> float:
        return self.items / self.time_s


def write_record(run_dir: str | os.PathLike[str], record: WorkloadRecord) -> Path:
    path = Path(run_dir) / WORKLOAD_FILE
    write_json_atomic(path, record)
    return path


def from_bench_json(doc: dict[str, Any]) -> WorkloadRecord:
    """The record of a ``bench`` run (bench.json): images over the measured steps."""
    measured = doc["step_times_s"][doc["warmup_steps"] :]
    return WorkloadRecord(
        workload=doc["model"],
        world_size=doc["world_size"],
        size=doc["image_size"],
        time_s=sum(measured),
        items=len(measured) * doc["global_batch_size"],
        unit="images",
        options=doc.get("options", {}),
        result={"final_loss": doc.get("final_loss")},
    )


def read_record(run_dir: Path) -> WorkloadRecord | None:
    """The run's workload.json (or its bench.json); None when rank 0 wrote neither."""
    path = run_dir / WORKLOAD_FILE
    if path.is_file():
        return msgspec.json.decode(path.read_bytes(), type=WorkloadRecord)
    bench = run_dir / BENCH_FILE
    if bench.is_file():
        return from_bench_json(json.loads(bench.read_text()))
    return None
