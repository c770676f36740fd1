"""The real nccl-tests log in shared/traces parses to the same columns `comm` prints."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
from rich.console import Console

from scalescope.analyze.comm.comm_bench import rows_from_nccl_tests
from scalescope.ingest import IngestError
from scalescope.ingest.nccl_tests import parse_nccl_tests
from scalescope.report.media.terminal import rich_table
from scalescope.report.views.comm import NCCL_COLUMNS, nccl_table

TRACES = Path(__file__).resolve().parents[4] / "shared" / "traces"
LOG = TRACES / "nccl_tests_all_reduce_8xA100.log"
pytestmark = pytest.mark.skipif(
    not LOG.is_file(),
    reason=f"real traces not found at {TRACES} (a clone outside the workspace has no ../shared)",
)


@pytest.fixture(scope="module")
def log():
    return parse_nccl_tests(LOG)


def test_header_devices_and_every_row(log):
    assert log.op == "all_reduce" and log.world_size == 8 and not log.problems
    assert len(log.rows) == 34  # 0 B twice, then 4 B to 8 GiB
    assert [r.nbytes for r in log.rows[2:]] == [4 * 2**i for i in range(32)]
    last = log.rows[-1]
    assert (last.count, last.dtype, last.redop) == (2147483648, "float", "sum")
    assert (last.time_us, last.busbw_gbps, last.inplace_time_us) == (63896.0, 235.26, 63959.0)


def test_avg_bus_bandwidth_line_is_the_mean_of_the_rows(log):
    mean = statistics.fmean(b for r in log.rows for b in (r.busbw_gbps, r.inplace_busbw_gbps))
    assert mean == pytest.approx(log.avg_busbw_gbps, abs=1e-3)


def test_our_algbw_and_busbw_from_its_times_match_its_columns(log):
    ours = {r.nbytes: r for r in rows_from_nccl_tests(log)}
    assert len(ours) == 32
    for theirs in log.rows[2:]:
        row = ours[theirs.nbytes]
        assert row.dtype == "float32" and row.count == theirs.count
        # the log prints 2 decimals and 4 significant digits of time
        assert row.algbw_gbps == pytest.approx(theirs.algbw_gbps, rel=2e-3, abs=0.006)
        assert row.busbw_gbps == pytest.approx(theirs.busbw_gbps, rel=2e-3, abs=0.006)


def test_log_renders_in_comms_table(log):
    console = Console(record=True, width=200)
    console.print(
        rich_table(nccl_table(list(rows_from_nccl_tests(log)), "all_reduce on nccl-tests"))
    )
    text = console.export_text()
    assert all(col.header in text for col in NCCL_COLUMNS)
    assert "8,589,934,592" in text and "235.2" in text


def test_a_file_without_a_table_is_an_error(tmp_path):
    bad = tmp_path / "all_gather.log"
    bad.write_text("# nThread 1 nGpus 8\nNCCL INFO nothing\n")
    with pytest.raises(IngestError, match="no nccl-tests table"):
        parse_nccl_tests(bad)
    with pytest.raises(IngestError, match="cannot read"):
        parse_nccl_tests(tmp_path / "missing.log")


def test_a_broken_row_is_a_problem_not_a_guess(tmp_path):
    text = LOG.read_text().replace("    67108864      16777216", "    67108864      x16777216")
    broken = tmp_path / "all_reduce_perf.log"
    broken.write_text(text)
    log = parse_nccl_tests(broken)
    assert len(log.rows) == 33 and len(log.problems) == 1
    assert "x16777216" in log.problems[0] and log.problems[0].startswith("line ")


def test_comm_shows_a_log_in_its_columns_and_names_a_bad_one(tmp_path):
    from typer.testing import CliRunner

    from scalescope.cli import app

    shown = CliRunner().invoke(app, ["comm", "--nccl-tests", str(LOG)])
    assert shown.exit_code == 0, shown.output
    assert "all_reduce from nccl-tests, 8 ranks" in shown.output
    assert "68.405 GB/s" in shown.output and "n/a" in shown.output
    bad = tmp_path / "bad[1].log"
    bad.write_text("not a log\n")
    failed = CliRunner().invoke(app, ["comm", "--nccl-tests", str(bad)])
    assert failed.exit_code == 2 and "bad[1].log: no nccl-tests table" in failed.output
