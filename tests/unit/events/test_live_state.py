"""The live state file: what the probe writes in place is what a reader sees."""

from __future__ import annotations

import os
import time

import psutil

from scalescope.events.files import live_state_path
from scalescope.events.live_state import (
    IMPORT,
    INIT_PROCESS_GROUP,
    MODEL,
    OLD_SIZE,
    REQUEST_AT,
    SIZE,
    STAGE,
    STAGE_AT,
    STAGES,
    TOTAL_PHASES,
    parse_live_state,
    read_live_state,
    request_flush,
)
from scalescope.events.live_state_writer import LiveStateWriter, open_live_state

OFFSET = 1_000_000_000_000_000_000


def test_writer_and_reader_agree(tmp_path):
    w = LiveStateWriter(live_state_path(tmp_path, 3), pid=4242, wall_minus_perf_ns=OFFSET)
    w.phase("forward", 5_000_000_000)
    w.enter("all_reduce", "0", 7, 16, 6_000_000_000)
    s = read_live_state(tmp_path, 3)
    assert (s.rank, s.pid, s.phase, s.op, s.group, s.seq, s.nbytes) == (
        3, 4242, "forward", "all_reduce", "0", 7, 16,
    )  # fmt: skip
    assert s.in_collective and s.entered_s == (6_000_000_000 + OFFSET) / 1e9
    assert s.last_progress_s is None
    w.leave("0", 6, 6_500_000_000)  # an earlier async collective completing
    assert read_live_state(tmp_path, 3).in_collective
    w.leave("0", 7, 7_000_000_000)
    w.step(1, 7_500_000_000)
    s = read_live_state(tmp_path, 3)
    assert not s.in_collective and s.left_s == (7_000_000_000 + OFFSET) / 1e9
    assert s.steps_done == 1 and s.last_progress_s == (7_500_000_000 + OFFSET) / 1e9
    w.close()
    w.phase("data", 1)  # after close (a late completion callback): no error, no write


def test_flush_requests_are_counted(tmp_path):
    w = LiveStateWriter(live_state_path(tmp_path, 0), pid=1, wall_minus_perf_ns=0)
    assert request_flush(tmp_path, 0) and request_flush(tmp_path, 0)
    assert w.requests() == (2, 0)
    w.answered(2)
    assert read_live_state(tmp_path, 0).flushes_answered == 2
    assert not request_flush(tmp_path, 9)


def test_the_running_totals_add_up_what_the_rank_did(tmp_path):
    w = LiveStateWriter(live_state_path(tmp_path, 1), pid=1, wall_minus_perf_ns=0)
    assert read_live_state(tmp_path, 1).totals.step_ns == 0
    for step in range(3):
        w.add_phase("forward", 10)
        w.add_phase("backward", 20 + step)
        w.add_phase("my_own_phase", 1_000)  # not a probe phase: not kept
        w.add_collective(5)
        w.add_step(100, 32)
    t = read_live_state(tmp_path, 1).totals
    assert (t.step_ns, t.samples, t.collective_ns) == (300, 96, 15)
    assert t.phase_ns == dict.fromkeys(TOTAL_PHASES, 0) | {"forward": 30, "backward": 63}


def test_the_totals_name_every_phase_the_probe_records():
    from scalescope.events.schema import EXTRA_PHASES, PHASES

    assert (*PHASES, *EXTRA_PHASES) == TOTAL_PHASES


def test_a_file_from_before_the_totals_reads_without_them(tmp_path):
    w = LiveStateWriter(live_state_path(tmp_path, 0), pid=7, wall_minus_perf_ns=0)
    w.step(4, 9)
    w.close()
    old = live_state_path(tmp_path, 0).read_bytes()[:OLD_SIZE]
    s = parse_live_state(0, old)
    assert (s.pid, s.steps_done, s.totals) == (7, 4, None)


def test_garbage_is_not_a_state():
    assert parse_live_state(0, b"\0" * SIZE) is None
    assert parse_live_state(0, b"SSLIVE01") is None


def test_start_stage_round_trip(tmp_path):
    w = LiveStateWriter(live_state_path(tmp_path, 1), pid=7, wall_minus_perf_ns=OFFSET)
    assert read_live_state(tmp_path, 1).stage == ""  # as in a file from before the stages
    w.stage(INIT_PROCESS_GROUP, 2_000_000_000)
    s = read_live_state(tmp_path, 1)
    assert (s.stage, s.stage_since_s) == (INIT_PROCESS_GROUP, (2_000_000_000 + OFFSET) / 1e9)
    assert w.stage_now == INIT_PROCESS_GROUP
    assert request_flush(tmp_path, 1)  # the request counters beside it stay apart
    w.stage(MODEL, 3_000_000_000)
    s = read_live_state(tmp_path, 1)
    assert (s.stage, s.flush_requests, s.phase) == (MODEL, 1, "outside")


def test_the_stage_field_fits_after_the_older_fields():
    assert STAGE_AT >= REQUEST_AT + 16 and STAGE_AT + STAGE.size <= SIZE
    assert all(len(name.encode()) <= 24 for name in STAGES)


def test_a_new_state_file_is_importing_since_the_process_started(tmp_path):
    before = time.time()
    w = open_live_state(tmp_path, 2)
    s = read_live_state(tmp_path, 2)
    assert (s.pid, s.stage) == (os.getpid(), IMPORT)
    started = psutil.Process().create_time()  # to the clock tick, against the boot time
    assert started - 1.5 < s.stage_since_s <= before
    w.close()


def test_the_recorder_keeps_the_totals_of_its_phases_and_steps(tmp_path):
    from scalescope.probe.recorder import Recorder

    recorder = Recorder(tmp_path / "events.arrow", 0)
    recorder.live = LiveStateWriter(live_state_path(tmp_path, 0), pid=1, wall_minus_perf_ns=0)
    try:
        recorder.phase("data", 1_000, 1_400)
        recorder.phase("forward", 1_400, 2_400)
        recorder.loader_samples = 16
        recorder.end_step(3_000)
        recorder.phase("forward", 3_000, 3_900)
        recorder.end_step(4_000)
        t = read_live_state(tmp_path, 0).totals
        assert (t.step_ns, t.samples) == (3_000, 16)  # the first step from its first phase
        assert (t.phase_ns["data"], t.phase_ns["forward"]) == (400, 1_900)
    finally:
        recorder.live.close()
        recorder.close()
