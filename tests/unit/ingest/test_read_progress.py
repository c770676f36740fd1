"""The progress of `analyze` reading a trace: every byte on disk counted once."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from scalescope.ingest import ingest
from scalescope.ingest.jsonstream import reading_progress

TRACES = Path(__file__).resolve().parents[4] / "shared" / "traces"
TIMELINE = TRACES / "horovod_timeline_cpu_8workers.json"
pytestmark = pytest.mark.skipif(not TIMELINE.is_file(), reason=f"{TIMELINE} not found")


@pytest.mark.parametrize("zipped", [False, True])
def test_bytes_reported_add_up_to_the_file(tmp_path: Path, zipped: bool) -> None:
    path = tmp_path / ("timeline.json.gz" if zipped else "timeline.json")
    if zipped:
        with open(TIMELINE, "rb") as src, gzip.open(path, "wb") as dst:
            shutil.copyfileobj(src, dst)
    else:
        shutil.copy(TIMELINE, path)
    seen: list[int] = []
    with reading_progress(seen.append):
        ingest(path)
    assert all(n >= 0 for n in seen) and len(seen) >= 1
    assert sum(seen) == path.stat().st_size
    seen.clear()
    ingest(path)  # outside the block nothing is reported
    assert seen == []
