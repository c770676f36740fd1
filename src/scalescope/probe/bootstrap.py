"""Entry point of every rank: ``python -m scalescope.probe.bootstrap --run-dir D [-m] TARGET ...``.

Installs the probe, runs the user's script or module as ``__main__`` (no code change),
and whatever happens (normal end, exception, SIGTERM) flushes the events and records the
rank's status in ``ranks/rank-N.json``.
"""

from __future__ import annotations

import argparse
import os
import resource
import runpy
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable
from contextlib import suppress
from dataclasses import asdict
from pathlib import Path
from typing import Any

from scalescope.events.run import (
    ClockSync,
    GroupMeta,
    PipelineMeta,
    RankMeta,
    rank_meta_path,
    write_json_atomic,
)
from scalescope.probe.binding import Binding, apply_placement, format_cpulist
from scalescope.probe.schedstat import runqueue_wait_s, thread_waits
from scalescope.probe.windows import DEFAULT_LEVEL, LEVELS

THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "OMP_PROC_BIND",
    "OMP_PLACES",
    "KMP_AFFINITY",
    "MKL_NUM_THREADS",
)

ERROR_LINES = 12
ORPHANED = "stopped by SIGTERM: its launcher died (the rank was blocked in C++ and did not end)"


class Interrupted(SystemExit):
    """Raised in the main thread by the SIGTERM/SIGINT handler."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signum = signum


_received: list[int] = []
"""Signals the handler saw: an error raised after one (a DataLoader worker the same Ctrl-C
killed first) is part of the interruption, not a failure."""
WORKER_SIGNALS = {"Interrupt": signal.SIGINT, "Terminated": signal.SIGTERM}
"""How torch's DataLoader names the signal that killed a worker ("killed by signal: ...")."""


_ending: list[bool] = []
"""Set when the rank starts to end (an error or the first signal): later signals (the
launcher's SIGTERM after the user's Ctrl-C) are noted but do not raise again, so the
rank's end is recorded instead of cut short by a second exception."""

_waits_at_start: dict[int, int] = {}
"""Run-queue wait (ns) of each thread when the rank meta was made (after torch's import):
the rank's recorded wait is the training's, not the imports'."""


_flushing: list[Callable[[], bool]] = []
"""Whether the probe's recorder is writing rows out on this thread: the handler's exception
waits for the write's end (``raise_deferred``), else the rows it had taken were lost."""
_deferred: list[int] = []


def _on_signal(signum: int, _frame: object) -> None:
    _received.append(signum)
    if _ending:
        return
    if any(flushing() for flushing in _flushing):
        _deferred.append(signum)
        return
    _ending.append(True)
    raise Interrupted(signum)


def raise_deferred() -> None:
    """After a flush: the signal that came while the main thread wrote rows, raised now."""
    if _deferred and not _ending and threading.current_thread() is threading.main_thread():
        _ending.append(True)
        raise Interrupted(_deferred[0])


def defer_signals_while_flushing(recorder: Any) -> None:
    _flushing.append(lambda: recorder.flushing_in == threading.get_ident())
    recorder.after_flush.append(raise_deferred)


def interrupting_signal(error_text: str) -> int | None:
    """The user's signal when an error is the consequence of one: a signal reached this rank,
    or a DataLoader worker was killed by SIGINT/SIGTERM (the terminal sends Ctrl-C to every
    process of the job, and a worker may die before the rank sees its own)."""
    if _received:
        return _received[0]
    for name, signum in WORKER_SIGNALS.items():
        if f"killed by signal: {name}" in error_text:
            return signum
    return None


PR_SET_PDEATHSIG = 1


def end_with_parent() -> None:
    """Have the kernel send this rank SIGTERM when its launcher dies, even by SIGKILL (which
    the launcher cannot pass on): no rank is left running without it. The rank then ends as
    on any SIGTERM, its events flushed. Linux only; elsewhere nothing is done."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the launcher died before the request took effect
        os.kill(os.getpid(), signal.SIGTERM)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="scalescope.probe.bootstrap")
    parser.add_argument("--run-dir", required=True, type=Path)
    parser.add_argument("--no-probe", action="store_true")
    parser.add_argument("--flush-every", type=int, default=20)
    parser.add_argument("--ring-rows", type=int, default=None)
    parser.add_argument("--report-bindings", action="store_true")
    parser.add_argument("--record", choices=LEVELS, default=DEFAULT_LEVEL)
    parser.add_argument("--warmup-steps", type=int, default=1)
    parser.add_argument("-m", dest="module", action="store_true")
    parser.add_argument("target")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    return parser.parse_args(argv)


def rank_meta_from_env(probe: bool, binding: Binding) -> RankMeta:
    import torch

    if binding.threads:
        torch.set_num_threads(binding.threads)
    now_wall, now_perf = time.time_ns(), time.perf_counter_ns()
    return RankMeta(
        rank=int(os.environ.get("RANK", "0")),
        local_rank=int(os.environ.get("LOCAL_RANK", "0")),
        world_size=int(os.environ.get("WORLD_SIZE", "1")),
        hostname=socket.gethostname(),
        pid=os.getpid(),
        num_threads=torch.get_num_threads(),
        probe=probe,
        wall_minus_perf_ns=now_wall - now_perf,
        start_time=now_wall / 1e9,
        cpus=binding.cpus,
        numa_node=binding.numa_node,
        bound=binding.applied,
        thread_env={k: os.environ[k] for k in THREAD_VARIABLES if k in os.environ},
    )


def describe_binding(meta: RankMeta) -> str:
    """One line per rank, like mpirun --report-bindings."""
    numa = "" if meta.numa_node is None else f" NUMA {meta.numa_node}"
    env = " ".join(f"{k}={v}" for k, v in meta.thread_env.items())
    how = "bound" if meta.bound else "not bound by scalescope"
    return (
        f"rank {meta.rank} (local {meta.local_rank}) on {meta.hostname}: cpus "
        f"{format_cpulist(meta.cpus)}{numa}, {meta.num_threads} torch threads, {how}; {env}"
    )


def run_target(args: argparse.Namespace) -> None:
    sys.argv = [args.target, *args.args]
    if args.module:
        runpy.run_module(args.target, run_name="__main__", alter_sys=True)
    else:
        sys.path.insert(0, str(Path(args.target).resolve().parent))
        runpy.run_path(args.target, run_name="__main__")


def _tail(text: str, lines: int = ERROR_LINES) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    live = None
    if not args.no_probe:  # before torch is imported: top shows the rank in stage "import"
        from scalescope.events.live_state_writer import open_live_state

        live = open_live_state(args.run_dir, int(os.environ.get("RANK", "0")))
    binding = apply_placement()
    meta = rank_meta_from_env(not args.no_probe, binding)
    _waits_at_start.update(thread_waits() or {})
    if args.report_bindings:
        print(describe_binding(meta), file=sys.stderr, flush=True)
    os.environ["SCALESCOPE_RUN_DIR"] = str(args.run_dir)
    write_json_atomic(rank_meta_path(args.run_dir, meta.rank), meta)
    probe = None
    if not args.no_probe:
        from scalescope.probe.install import Probe

        probe = Probe(
            args.run_dir,
            meta.rank,
            args.flush_every,
            live,
            args.record,
            args.warmup_steps,
            args.ring_rows,
        ).install()
        probe.recorder.before_flush.append(groups_publisher(args.run_dir, meta, probe))
        defer_signals_while_flushing(probe.recorder)
        probe.live.on_orphaned = lambda: _end_orphan(args.run_dir, meta, probe)
        probe.live.on_stopped = lambda signum: _end_stopped(args.run_dir, meta, probe, signum)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _on_signal)
    end_with_parent()
    status, code, error = "completed", 0, None
    try:
        run_target(args)
    except BaseException as exc:
        _ending.append(True)
        status, code, error = how_it_ended(exc)
    finally:
        _ending.append(True)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)
        _finish(args.run_dir, meta, probe, status, code, error)
    return code


def how_it_ended(exc: BaseException) -> tuple[str, int, str | None]:
    """The status, exit code and error of a rank that ``exc`` ended."""
    if isinstance(exc, Interrupted):
        error = f"stopped by {signal.Signals(exc.signum).name}"
        unwinding = exc.__context__
        if isinstance(unwinding, Exception):  # the signal came while this error unwound
            first_line = next(iter(str(unwinding).splitlines()), "")[:200]
            error += f" (during {type(unwinding).__name__}: {first_line})"
        return "interrupted", exc.code, error
    if isinstance(exc, SystemExit):
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        return (
            ("completed", 0, None) if code == 0 else ("failed", code, f"SystemExit({exc.code!r})")
        )
    error = _tail("".join(traceback.format_exception(exc)))
    signum = interrupting_signal(error)
    if signum is not None:
        return (
            "interrupted",
            128 + signum,
            f"stopped by {signal.Signals(signum).name} ({error.splitlines()[-1]})",
        )
    traceback.print_exception(exc)
    return "failed", 1, error


_finishing = threading.Lock()
_meta_writing = threading.Lock()
"""Held while the rank's meta file is written: a publication of its groups (at a flush, on
the watch thread too) never lands after the rank's end was recorded."""


def groups_publisher(run_dir: Path, meta: RankMeta, probe: Any) -> Callable[[], None]:
    """Called before each flush: the rank's meta file rewritten when the groups it labelled
    changed (once or twice a run), so that the launcher's metrics name a collective's mesh
    dimension while the run trains (launch/metrics/labels.py), not only after its end."""

    def publish() -> None:
        groups = groups_meta(probe)
        if not groups or groups == meta.groups:
            return
        with _meta_writing:
            if _finishing.locked():  # the end is being recorded, with the groups
                return
            meta.groups = groups
            with suppress(Exception):  # never the rank's end; the end's write says why
                write_json_atomic(rank_meta_path(run_dir, meta.rank), meta)

    return publish


def _end_from_watch(run_dir: Path, meta: RankMeta, probe: Any, signum: int, error: str) -> None:
    """The main thread is blocked (in C++) and will not end the rank: record what we have
    from the watch thread and exit, as if ``signum`` had ended it."""
    if not _finishing.acquire(blocking=False):
        return
    code = 128 + signum
    _record_end(run_dir, meta, probe, "interrupted", code, error)
    os._exit(code)


def _end_orphan(run_dir: Path, meta: RankMeta, probe: Any) -> None:
    """The launcher died."""
    _end_from_watch(run_dir, meta, probe, signal.SIGTERM, ORPHANED)


def _end_stopped(run_dir: Path, meta: RankMeta, probe: Any, signum: int) -> None:
    """A stop signal arrived and the main thread never ran its handler."""
    from scalescope.probe.live import STOP_GRACE_S

    error = (
        f"stopped by {signal.Signals(signum).name}: blocked in C++ (a collective?), ended "
        f"{STOP_GRACE_S:.0f} s later by its watch thread"
    )
    _end_from_watch(run_dir, meta, probe, signum, error)


def _finish(
    run_dir: Path,
    meta: RankMeta,
    probe: Any,
    status: str,
    code: int,
    error: str | None,
) -> None:
    if _finishing.acquire(blocking=False):
        _record_end(run_dir, meta, probe, status, code, error)


def model_layer_shares(probe: Any) -> dict[str, float] | None:
    """The timed model's layer kinds, else those of the pipeline stages the rank holds (no
    model is stepped as a whole there); None on any failure: it must never break a rank."""
    try:
        from torch import nn

        from scalescope.probe.model_layers import layer_shares

        model = getattr(probe.phases, "watched", None)
        blocks = getattr(getattr(probe, "pipeline", None), "modules", None)
        if model is None and blocks:
            model = nn.ModuleList(blocks)
        return layer_shares(model)
    except Exception:  # a model that fails to walk (odd parameters, a broken module)
        return None


def groups_meta(probe: Any) -> dict[str, GroupMeta]:
    """The groups the rank labelled; {} on any failure: recording the end comes first (this
    runs on the watch thread too, while the main thread is blocked in C++)."""
    try:
        return {n: GroupMeta(ranks=r, dim=d, backend=b) for n, (r, d, b) in probe.groups.items()}
    except Exception:  # a group torch tore down under us: the rows keep their labels
        return {}


def pipeline_meta(probe: Any) -> PipelineMeta | None:
    """The rank's pipeline stage; None on any failure (as ``groups_meta``)."""
    try:
        return probe.pipeline.meta(probe.steps)
    except Exception:  # a stage torch tore down under us
        return None


def _record_end(
    run_dir: Path, meta: RankMeta, probe: Any, status: str, code: int, error: str | None
) -> None:
    if probe is not None:
        probe.close()
        meta.steps = probe.steps
        meta.optimizer_param_bytes = probe.optimizer_param_bytes
        meta.layer_shares = model_layer_shares(probe)
        meta.groups = groups_meta(probe)
        meta.zero_stage = getattr(probe, "zero_stage", None)
        meta.pipeline = pipeline_meta(probe)
        meta.probe_errors = list(probe.errors)
        meta.clock = [ClockSync(**asdict(s)) for s in probe.clock.samples]
    meta.status, meta.exit_code, meta.error = status, code, error
    meta.end_time = time.time()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    meta.cpu_s, meta.involuntary_switches = usage.ru_utime + usage.ru_stime, usage.ru_nivcsw
    meta.runqueue_wait_s = runqueue_wait_s(since=_waits_at_start)
    try:
        with _meta_writing:
            write_json_atomic(rank_meta_path(run_dir, meta.rank), meta)
    except OSError as exc:  # a full or read-only disk: the launcher still records the exit
        print(f"scalescope: rank {meta.rank} could not write its status: {exc}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
