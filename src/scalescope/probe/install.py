"""Install and remove the probe inside one rank."""

from __future__ import annotations

import os
import time
from pathlib import Path

from scalescope.events.live_state import LiveStateWriter
from scalescope.events.run import events_path
from scalescope.probe import group_hooks
from scalescope.probe.batch_p2p import BatchP2P
from scalescope.probe.clock import ClockHooks
from scalescope.probe.collectives import CollectiveWrapper
from scalescope.probe.ddp import DDPPatch
from scalescope.probe.deepspeed import DeepSpeedPatch
from scalescope.probe.deepspeed_pipe import DeepSpeedPipePatch
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

WAY_VARIABLE = "SCALESCOPE_COLLECTIVES"
"""``wrappers``: the ``dist.*`` and functional-op wrappers even where torch has group hooks
(what a torch without them records; the tests of that path run on a torch with them)."""


def hooks_wanted() -> bool:
    return group_hooks.available() and os.environ.get(WAY_VARIABLE) != "wrappers"


class Probe:
    """Everything the probe changes in this process, and the recorder it writes to."""

    def __init__(
        self,
        run_dir: Path,
        rank: int,
        flush_every_steps: int = 20,
        live: LiveStateWriter | None = None,
    ) -> None:
        """``live``: the rank's live state file when the bootstrap opened it already."""
        self.recorder = Recorder(events_path(run_dir, rank), rank, flush_every_steps)
        self.collectives = CollectiveWrapper(self.recorder)
        self.group_hooks = (
            GroupHooks(self.recorder, self.collectives.groups, self.collectives.cuda)
            if hooks_wanted()
            else None
        )
        self.functional = FunctionalCollectives(self.recorder, self.collectives.cuda)
        self.p2p = P2PWaits(
            self.recorder,
            self.collectives.groups,
            self.group_hooks.completions if self.group_hooks else None,
        )
        self.collectives.completions = self.p2p.completions
        self.batch_p2p = BatchP2P(self.recorder, self.collectives.groups, self.collectives.complete)
        self.phases = PhaseHooks(self.recorder)
        self.pipeline = PipelineProbe(self.recorder, self.phases)
        self.ddp = DDPPatch(
            self.recorder,
            self.phases,
            self.collectives.groups,
            settle=self.group_hooks.completions.settle if self.group_hooks else None,
        )
        self.fsdp = FSDPPatch()
        self.deepspeed = DeepSpeedPatch(self.phases)
        self.deepspeed_pipe = DeepSpeedPipePatch(self.phases, self.pipeline)
        self.fsdp_knobs = FSDPKnobs()
        self.mesh = MeshNames(self.collectives.groups)
        self.clock = ClockHooks()
        self.recorder.before_flush.append(self.collectives.cuda.resolve)
        self.recorder.before_flush.append(self.phases.cuda.resolve)
        offset = time.time_ns() - time.perf_counter_ns()
        self.live = LiveProbe(run_dir, rank, os.getpid(), offset, live)
        self.recorder.live = self.live.writer
        self.stages = StartStages(self.live.writer)

    def install(self) -> Probe:
        """Collectives through torch's group hooks where this torch has them, else by
        wrapping the ``dist.*`` functions and the functional collectives' ops."""
        if self.group_hooks is not None:
            self.group_hooks.install()
        else:
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
        if self.group_hooks is not None:
            self.group_hooks.uninstall()
        self._resolve_device_times()
        self.live.close()
        self.recorder.close()

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
