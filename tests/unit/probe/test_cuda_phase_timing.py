"""Phases of a CUDA model take their durations from CUDA events, resolved at flush.

This machine has no GPU, so the events here are stand-ins with the three methods the probe
calls (``query``, ``synchronize``, ``elapsed_time``): what is tested is the bookkeeping —
a row whose device time is not known yet is never written with the host's guess, and the
last ones are waited for once when the probe closes. The real events run in
``make gpu-check`` (check 2.phases, docs/gpu.md).
"""

from __future__ import annotations

from pathlib import Path

from scalescope.events.reader import read_event_stream
from scalescope.events.schema import Kind
from scalescope.probe.cuda_timing import CudaTimings
from scalescope.probe.phases import PhaseHooks
from scalescope.probe.recorder import Recorder


class StandInEvent:
    """A recorded CUDA event at ``at_ms`` of device time, complete once ``done``."""

    def __init__(self, at_ms: float) -> None:
        self.at_ms, self.done = at_ms, False

    def query(self) -> bool:
        return self.done

    def synchronize(self) -> None:
        self.done = True

    def elapsed_time(self, end: StandInEvent) -> float:
        return end.at_ms - self.at_ms


def phase_durations(path: Path) -> dict[str, list[int]]:
    table = read_event_stream(path).table.to_pydict()
    out: dict[str, list[int]] = {}
    for kind, name, dur in zip(table["kind"], table["name"], table["dur_ns"], strict=True):
        if kind == Kind.PHASE:
            out.setdefault(name, []).append(dur)
    return out


def test_pending_phase_rows_wait_for_their_events(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path / "rank-0.arrows", 0)
    timings = CudaTimings()
    recorder.before_flush.append(timings.resolve)
    start, end = StandInEvent(1.0), StandInEvent(26.5)
    row = recorder.phase("forward", 0, 1_000)  # host: 1 µs to queue the kernels
    timings.span(row, start, end)
    recorder.phase("data", 2_000, 3_000)
    recorder.flush()
    assert phase_durations(tmp_path / "rank-0.arrows") == {"data": [1_000]}
    end.done = True
    recorder.flush()
    recorder.close()
    assert phase_durations(tmp_path / "rank-0.arrows") == {"data": [1_000], "forward": [25_500_000]}


def test_close_waits_for_the_last_events(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path / "rank-0.arrows", 0)
    timings = CudaTimings()
    timings.span(recorder.phase("optimizer", 0, 10), StandInEvent(0.0), StandInEvent(2.0))
    timings.resolve(wait=True)
    recorder.close()
    assert phase_durations(tmp_path / "rank-0.arrows") == {"optimizer": [2_000_000]}


def test_hooks_mark_device_time_only_on_cuda(tmp_path: Path) -> None:
    """On the CPU nothing is pending: the host times are the phases' times."""
    import torch

    hooks = PhaseHooks(Recorder(tmp_path / "rank-0.arrows", 0))
    model = torch.nn.Linear(2, 2)
    hooks.watch_forward(model)
    assert hooks.on_cuda is False
    hooks._forward_pre(model, (torch.zeros(4, 2),), {})
    hooks._forward_post(None, None, None)
    assert hooks.cuda.pending == [] and hooks.recorder.rows[0][4] is not None
    marks = iter([StandInEvent(0.0), StandInEvent(3.0)])
    hooks.on_cuda, hooks.cuda.start = True, lambda: next(marks)
    hooks._forward_pre(model, (torch.zeros(4, 2),), {})
    hooks._forward_post(None, None, None)
    ((row, first, last),) = hooks.cuda.pending
    assert row[2] == "forward" and row[4] is None and last.at_ms - first.at_ms == 3.0
