"""Install and remove the probe inside one rank."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from scalescope.events.flight_ring import DEFAULT_ROWS
from scalescope.events.live_state_writer import LiveStateWriter
from scalescope.events.run import events_path
from scalescope.probe import dispatched, group_hooks, native
from scalescope.probe.batch_p2p import BatchP2P
from scalescope.probe.clock import ClockHooks
from scalescope.probe.collectives import CollectiveWrapper
from scalescope.probe.completion import HostCompletions
from scalescope.probe.ddp import DDPPatch
from scalescope.probe.deepspeed import DeepSpeedPatch
from scalescope.probe.deepspeed_pipe import DeepSpeedPipePatch
from scalescope.probe.dispatched import DispatchedCollectives
from scalescope.probe.flight_ring import open_ring
from scalescope.probe.fsdp import FSDPPatch
from scalescope.probe.fsdp_knobs import FSDPKnobs
from scalescope.probe.functional import FunctionalCollectives
from scalescope.probe.group_hooks import GroupHooks
from scalescope.probe.live import LiveProbe, StartStages
from scalescope.probe.mesh import MeshNames
from scalescope.probe.p2p import P2PWaits
from scalescope.probe.phases import PhaseHooks
from scalescope.probe.pipeline import PipelineProbe
from scalescope.probe.recorder import Recorder
from scalescope.probe.ring_flush import RingFlush
from scalescope.probe.summary import StepSummaries
from scalescope.probe.windows import FULL, SUMMARY, windows_from_env

COMPRESSION = {False: None, True: "zstd"}
"""The event file's batches at ``--record full`` (as ever) and at ``summary``."""

STREAM_ERRORS = ("event write failed", "event file close failed")
"""The recorder's errors that leave rows out of the event stream (probe/recorder.py): the ring
is kept then; after a clean end its rows are all in the stream and the file is removed."""

WAY_VARIABLE = "SCALESCOPE_COLLECTIVES"
"""Which way the probe sees collectives, instead of its own choice: ``hooks`` (torch's
process-group hooks), ``dispatcher`` (the c10d ops intercepted in C++: a torch without hooks
takes it; the tests of it run on a torch with them) or ``wrappers`` (the ``dist.*`` and
functional-op wrappers)."""
WAYS = ("hooks", "dispatcher", "wrappers")


def collectives_way(errors: list[str]) -> str:
    """The way this rank sees collectives: the one ``WAY_VARIABLE`` asks for where it can,
    else hooks where torch has them, else the dispatcher where the C++ side is built, else
    the wrappers. A way asked for that cannot be taken, or an unknown one, is said in
    ``errors``."""
    asked = os.environ.get(WAY_VARIABLE, "")
    if asked and asked not in WAYS:
        errors.append(f"{WAY_VARIABLE}={asked!r} is not one of {', '.join(WAYS)}: ignored")
        asked = ""
    if asked == "wrappers":
        return "wrappers"
    if asked == "hooks" and not group_hooks.available():
        errors.append(f"{WAY_VARIABLE}=hooks: this torch has no process-group hooks")
    elif asked == "hooks" or (not asked and group_hooks.available()):
        return "hooks"
    if dispatched.ready() is not None:
        return "dispatcher"
    if asked == "dispatcher":
        errors.append(f"{WAY_VARIABLE}=dispatcher: {_no_dispatcher()}")
    return "hooks" if group_hooks.available() else "wrappers"


def _no_dispatcher() -> str:
    if native.load() is None:
        return "the probe's C++ module is not built (python -m scalescope.probe.native)"
    return "the probe's C++ module was built without CUDA, and this machine has it"


def _settled() -> None:
    """DDP's broadcasts complete in C++ on the dispatcher's way: nothing to settle."""


class Probe:
    """Everything the probe changes in this process, and the recorder it writes to."""

    def __init__(
        self,
        run_dir: Path,
        rank: int,
        flush_every_steps: int = 20,
        live: LiveStateWriter | None = None,
        record: str = FULL,
        warmup_steps: int = 1,
        ring_rows: int | None = None,
    ) -> None:
        """``live``: the rank's live state file when the bootstrap opened it already;
        ``record``: full (every call's row) or summary (probe/summary.py), whose first
        window holds the ``warmup_steps`` and 8 steps more; ``ring_rows``: the flight
        recorder's rows (0: none; None: DEFAULT_ROWS)."""
        summary = record == SUMMARY
        self.recorder = Recorder(
            events_path(run_dir, rank), rank, flush_every_steps, compression=COMPRESSION[summary]
        )
        windows = windows_from_env(warmup_steps) if summary else None
        if windows is not None:
            self.recorder.fold = StepSummaries(windows)
        self.ring = open_ring(
            run_dir, rank, DEFAULT_ROWS if ring_rows is None else ring_rows, self.recorder.errors
        )
        if self.ring is not None:
            self.recorder.sink = self.ring.append
        self.collectives = CollectiveWrapper(self.recorder)
        self.way = collectives_way(self.recorder.errors)
        self.group_hooks = (
            GroupHooks(self.recorder, self.collectives.groups, self.collectives.cuda)
            if self.way == "hooks"
            else None
        )
        module = dispatched.ready() if self.way == "dispatcher" else None
        self.dispatched = (
            None
            if module is None
            else DispatchedCollectives(self.recorder, self.collectives.groups, module)
        )
        self.functional = FunctionalCollectives(self.recorder, self.collectives.cuda)
        self.p2p = P2PWaits(self.recorder, self.collectives.groups, self._completions())
        self.collectives.completions = self.p2p.completions
        self.batch_p2p = BatchP2P(self.recorder, self.collectives.groups, self.collectives.complete)
        self.phases = PhaseHooks(self.recorder)
        self.pipeline = PipelineProbe(self.recorder, self.phases)
        self.ddp = DDPPatch(
            self.recorder,
            self.phases,
            self.collectives.groups,
            settle=self._settle(),
        )
        self.fsdp = FSDPPatch()
        self.deepspeed = DeepSpeedPatch(self.phases)
        self.deepspeed_pipe = DeepSpeedPipePatch(self.phases, self.pipeline)
        self.fsdp_knobs = FSDPKnobs()
        self.mesh = MeshNames(self.collectives.groups)
        self.clock = ClockHooks()
        self.recorder.before_flush.append(self.collectives.cuda.resolve)
        self.collectives.cuda.on_resolved = self.recorder.done
        self.recorder.before_flush.append(self.phases.cuda.resolve)
        offset = time.time_ns() - time.perf_counter_ns()
        self.live = LiveProbe(run_dir, rank, os.getpid(), offset, live)
        self.recorder.live = self.live.writer
        if windows is not None and self.ring is not None:
            self.live.on_flush = RingFlush(run_dir, rank, windows, self.recorder.errors)
        self.collectives.groups.live = self.live.writer
        self.recorder.group_slot = self.collectives.groups.live_slot
        self.stages = StartStages(self.live.writer)

    def _completions(self) -> HostCompletions | None:
        """The way's ``Work.wait`` wrapper, for the p2p waits too (one per process)."""
        if self.group_hooks is not None:
            return self.group_hooks.completions
        return self.dispatched.completions if self.dispatched is not None else None

    def _settle(self) -> Callable[[], None] | None:
        """What completes DDP's last broadcast when its C++ call returns, on the ways that
        record DDP's broadcasts themselves; None: the DDP patch records them."""
        if self.group_hooks is not None:
            return self.group_hooks.completions.settle
        return _settled if self.dispatched is not None else None

    def install(self) -> Probe:
        """Collectives through the way ``collectives_way`` chose: torch's group hooks, the
        c10d ops intercepted in C++, or the wrappers of the ``dist.*`` functions and the
        functional collectives' ops (also where the c10d ops could not be intercepted)."""
        if self.group_hooks is not None:
            self.group_hooks.install()
        elif self.dispatched is None or not self.dispatched.install():
            self.dispatched = None
            self.way = "wrappers"
            self.ddp.settle = None
            self.collectives.install()
            self.batch_p2p.install(self.collectives.originals)
            self.functional.install()
        self.p2p.install()
        self.phases.install()
        self.pipeline.install()
        self.ddp.install()
        self.fsdp.install()
        self.deepspeed.install()
        self.deepspeed_pipe.install()
        self.fsdp_knobs.install()
        self.mesh.install()
        self.clock.install()
        self.stages.install()
        self.live.start(self.recorder)
        return self

    def close(self) -> None:
        """Remove every patch and write what is left; safe to call twice."""
        self.stages.uninstall()
        self.clock.uninstall()
        self.ddp.uninstall()
        self.fsdp.uninstall()
        self.deepspeed.uninstall()
        self.deepspeed_pipe.uninstall()
        self.fsdp_knobs.uninstall()
        self.mesh.uninstall()
        self.pipeline.uninstall()
        self.phases.uninstall()
        self.batch_p2p.uninstall()
        self.collectives.uninstall()
        self.functional.uninstall()
        self.p2p.uninstall()
        self.p2p.completions.uninstall()  # a fallen-back dispatcher's, which p2p shares
        if self.group_hooks is not None:
            self.group_hooks.uninstall()
        if self.dispatched is not None:
            self.dispatched.uninstall()
        self._resolve_device_times()
        self.live.close()
        self.recorder.close()
        if self.ring is not None:
            self.recorder.sink = None
            self.ring.close(remove=not any(e.startswith(STREAM_ERRORS) for e in self.errors))

    def _resolve_device_times(self) -> None:
        """The last steps' CUDA events, waited for once at the end (else their collectives
        would be written as never completed, and their phases lost)."""
        if not (self.collectives.cuda.pending or self.phases.cuda.pending):
            return
        try:
            self.collectives.cuda.resolve(wait=True)
            self.phases.cuda.resolve(wait=True)
        except RuntimeError as exc:  # a failed CUDA context: write what is known
            self.recorder.errors.append(f"CUDA events not resolved at exit: {exc}")

    @property
    def steps(self) -> int:
        return self.recorder.step

    @property
    def optimizer_param_bytes(self) -> int | None:
        return self.phases.stepped_param_bytes

    @property
    def zero_stage(self) -> int | None:
        return self.deepspeed.zero_stage

    @property
    def errors(self) -> list[str]:
        return self.recorder.errors + self.clock.errors + self.mesh.errors + self.pipeline.errors

    @property
    def groups(self) -> dict[str, tuple[list[int], str, str]]:
        """The groups this rank labelled: label -> (members, mesh dimension or "", backend)."""
        return self.collectives.groups.described()
