"""Format detection from content (gzip-aware, whatever the name) and the errors for non-traces."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from scalescope.ingest import HOROVOD, KINETO, IngestError, detect, ingest
from scalescope.ingest.detect import UNKNOWN, sniff

TRACES = Path(__file__).resolve().parents[4] / "shared" / "traces"
needs_traces = pytest.mark.skipif(
    not TRACES.is_dir(),
    reason=f"real traces not found at {TRACES} (a clone outside the workspace has no ../shared)",
)

REAL = {
    "hta_nccl_data_rank0.json.gz": KINETO,
    "hta_sampled_rank-0.json.gz": KINETO,
    "hta_sampled_rank-1.json.gz": KINETO,
    "hta_cpu_only_gloo_rank-34.json.gz": KINETO,
    "horovod_timeline_gpu_8workers.json": HOROVOD,
    "horovod_timeline_cpu_8workers.json": HOROVOD,
}


@needs_traces
@pytest.mark.parametrize(("name", "expected"), sorted(REAL.items()))
def test_real_traces_are_recognised(name: str, expected: str) -> None:
    assert detect(TRACES / name) == expected


@needs_traces
def test_detection_ignores_the_file_name(tmp_path: Path) -> None:
    kineto = tmp_path / "looks_like.log"
    shutil.copy(TRACES / "hta_cpu_only_gloo_rank-34.json.gz", kineto)  # gzip, odd name
    horovod = tmp_path / "timeline.json.gz.txt"
    horovod.write_bytes(gzip.compress((TRACES / "horovod_timeline_cpu_8workers.json").read_bytes()))
    assert detect(kineto) == KINETO
    assert detect(horovod) == HOROVOD


@needs_traces
def test_a_log_that_is_not_a_trace_gets_one_clear_line() -> None:
    path = TRACES / "nccl_tests_all_reduce_8xA100.log"
    assert sniff(path).format == UNKNOWN
    with pytest.raises(IngestError) as err:
        ingest(path)
    message = str(err.value)
    assert "\n" not in message
    assert "is not a trace" in message
    assert "Kineto" in message and "Horovod" in message


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"", "empty"),
        (b"\x00\x01\x02binary", "binary"),
        (b'{"a": 1, "b": [1, 2]}', "starts with"),
        (b'{"traceEvents": [{"ph": "X", "name": "x", "ts": 1, "dur": 2}]}', "not one torch"),
        (b'[{"ph": "X", "name": "x", "ts": 1}]', "no Horovod activity"),
        (b"name,value\n1,2\n", "starts with"),
    ],
)
def test_other_content_is_unknown_with_a_reason(tmp_path: Path, content: bytes, why: str) -> None:
    path = tmp_path / "trace.json"
    path.write_bytes(content)
    found = sniff(path)
    assert found.format == UNKNOWN
    assert why in found.why
    with pytest.raises(IngestError, match="supported: torch.profiler"):
        ingest(path)


def test_missing_path_and_directory_without_traces(tmp_path: Path) -> None:
    with pytest.raises(IngestError, match="no such file"):
        ingest(tmp_path / "nope.json")
    (tmp_path / "notes.txt").write_text("not a trace")
    with pytest.raises(IngestError, match="no trace files found"):
        ingest(tmp_path)


@needs_traces
def test_a_gzip_cut_short_is_still_recognised(tmp_path: Path) -> None:
    data = (TRACES / "hta_sampled_rank-0.json.gz").read_bytes()
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(data[: len(data) // 3])
    assert detect(cut) == KINETO
