"""Which of the launcher's watches (hang, slowdown) stopped on an error, and why.

A watch that stopped is silent, and silence reads as "no hang, no slowdown". So its stop is
written where its readers look: ``RUN_DIR/watches.json`` for ``top RUN_DIR`` and ``report``
(here), the job's store for ``top --connect`` (launch/channel/store.py), and the metrics'
``scalescope_watch_up`` gauge (launch/metrics/endpoint.py).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from scalescope.events.files import WATCHES_FILE
from scalescope.events.run import write_json_atomic


def record_stop(run_dir: Path, watch: str, error: str) -> None:
    """``watch`` stopped on ``error``; beside the stops recorded before. Best effort: a run
    directory that cannot be written leaves the log's line and the metrics."""
    stops = read_stops(run_dir) | {watch: error}
    with contextlib.suppress(OSError):
        write_json_atomic(Path(run_dir) / WATCHES_FILE, {"stopped": stops})


def read_stops(run_dir: Path) -> dict[str, str]:
    """Each watch that stopped, with its error; empty when none did (or the file is not
    readable: a reader must not fail on it)."""
    try:
        doc = json.loads((Path(run_dir) / WATCHES_FILE).read_text())
    except (OSError, ValueError):
        return {}
    stopped = doc.get("stopped") if isinstance(doc, dict) else None
    return {str(k): str(v) for k, v in stopped.items()} if isinstance(stopped, dict) else {}


def stop_line(watch: str, error: str) -> str:
    """The sentence ``top`` shows for a stopped watch."""
    return f"the {watch} watch stopped on an error ({error}): it names nothing from here on"
