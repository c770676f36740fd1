"""The C++ side in Python: its groups (hooked, or watched by the intercepted c10d ops), the
thread's tag, the step, the live state, and its rows taken into the recorder at each flush
(probe/native.py builds it)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch

from scalescope.events import live_state
from scalescope.events.schema import Kind
from scalescope.probe.collectives import DTYPE_NAMES, dtype_name
from scalescope.probe.completion import HostCompletions
from scalescope.probe.context import UNRECORDED, current_tag, mirror_tags, tag_code, tag_named
from scalescope.probe.recorder import KEPT_STAGES, SETUP_TAGS, Recorder

_labels: dict[int, str] = {}
"""The C++ hooks' group number -> its label, per process as their state is."""


def native_takes(pg: Any, device_timing: bool) -> bool:
    """The C++ hooks take gloo groups on a machine without CUDA, and gloo and NCCL groups
    wherever they were built to time devices (CUDA events from C++). Otherwise NCCL, and gloo
    beside a GPU, keep the Python hooks and their CUDA events; MPI (whose works the C++ side
    does not know) always does."""
    try:
        backend = pg._get_backend_name()
    except Exception:
        return False
    if backend == "gloo" and not torch.cuda.is_available():
        return True
    return device_timing and backend in ("gloo", "nccl")


DTYPES = (
    "float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8",
    "uint16", "uint32", "uint64", "bool", "complex64", "complex128", "float8_e4m3fn",
    "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu",
)  # fmt: skip
"""The dtypes a collective carries (a newer torch's other names read "")."""


def _dtype_names(module: ModuleType) -> dict[int, str]:
    names: dict[int, str] = {}
    for name in DTYPES:
        value = getattr(torch, name, None)
        if isinstance(value, torch.dtype):
            with contextlib.suppress(Exception):  # a dtype this torch cannot allocate
                t = torch.empty(0, dtype=value)
                names[module.dtype_code(t)] = DTYPE_NAMES.get(value) or dtype_name(t)
    return names


class NativeRows:
    def __init__(
        self,
        module: ModuleType,
        recorder: Recorder,
        ops: dict[int, str],
        on_error: Callable[[str], None],
        global_rank: Callable[[str, int], int] = lambda label, local: -1,
        group_slot: Callable[[str], int] = lambda label: 0,
        completions: HostCompletions | None = None,
    ) -> None:
        """``ops``: the probe's op name by its code (torch's ``HookOpName`` value for the
        hooks, probe/dispatched.py's for the c10d ops); ``on_error``: told each problem the
        C++ side kept (said once each); ``global_rank``: a group label's group rank as a
        global rank (a send's or recv's peer); ``group_slot``: a group label's time slot in
        the live state (GroupNames.live_slot: 0 none, -1 its members not known yet);
        ``completions``: the process's ``Work.wait`` wrapper, which tells the C++ side when
        the caller waited for a work without a future (its own if None)."""
        self.completions = completions or HostCompletions(recorder)
        self._owns_completions = completions is None
        self.module = module
        self.global_rank = global_rank
        self.group_slot = group_slot
        self._unslotted: dict[str, int] = {}
        """Groups without a live slot yet, by label: their members may be known later."""
        self.recorder = recorder
        self.ops = ops
        self.on_error = on_error
        self.dtypes = _dtype_names(module)
        self.device_timing = bool(module.device_timing())
        self.active = False
        self._groups: dict[str, int] = {}
        """Group label -> its number: a group made again under the same label keeps its
        sequence numbers; another probe (installed again) counts from 0."""
        op_list = [ops.get(code, "unknown") for code in range(max(ops, default=-1) + 1)]
        module.configure(
            op_list,
            [tag_code(t) for t in sorted(UNRECORDED)],
            [tag_code(t) for t in sorted(SETUP_TAGS)],
        )

    def _code(self, label: str) -> int:
        code = self._groups.get(label)
        if code is None:
            code = self._groups[label] = self.module.add_group(label)
            _labels[code] = label
            self._unslotted[label] = code
            self._slot_groups()
        if not self.active:
            self._start()
        return code

    def attach(self, pg: Any, hook_id: int, label: str) -> None:
        """Register the C++ hooks on ``pg`` (a torch with process-group hooks)."""
        self.module.attach(pg, hook_id, self._code(label), pg.size())

    def detach(self, pg: Any, hook_id: int) -> None:
        self.module.detach(pg, hook_id)

    def watch(self, pg: Any, label: str) -> None:
        """Record ``pg``'s collectives as the intercepted c10d ops see them."""
        self.module.watch_group(pg, self._code(label))

    def unwatch(self, pg: Any) -> None:
        self.module.unwatch_group(pg)

    def _start(self) -> None:
        self.active = True
        self.completions.native_waited = self.module.waited
        self.completions.install()
        if problem := self.module.intercept_waits():
            self.on_error(f"{problem}: functional collectives on gloo are left incomplete")
        mirror_tags(self.module.set_tag)
        self.module.set_tag(tag_code(current_tag()))  # this thread may be inside a tag
        self.recorder.on_step = self.module.set_step
        self.module.set_step(self.recorder.step)
        self.recorder.row_sources.append(self.rows)
        live = self.recorder.live
        if live is not None and self.module.set_live(
            str(live.path), live_state.COLLECTIVE_AT, live_state.DONE_AT, live_state.LEFT_AT,
            live_state.STAGE_AT, live_state.COLLECTIVE_NS_AT, live_state.SIZE,
        ):  # fmt: skip
            live.stage_listener = self._arm
            self._arm(live.stage_now)

    def _arm(self, stage: str) -> None:
        self.module.arm_running(stage not in KEPT_STAGES)

    def stop(self) -> None:
        """Stop mirroring tags and writing the live state; rows still drain at the last flush."""
        if not self.active:
            return
        self.active = False
        self.completions.native_waited = None
        self.module.release_waits()
        if self._owns_completions:
            self.completions.uninstall()
        mirror_tags(None)
        self.module.set_live("", 0, 0, 0, 0, 0, 0)
        self.recorder.on_step = None
        if self.recorder.live is not None:
            self.recorder.live.stage_listener = None

    def _slot_groups(self) -> None:
        for label, code in list(self._unslotted.items()):
            at = self.group_slot(label)
            if at > 0:
                self.module.set_group_slot(code, at)
            if at >= 0:
                del self._unslotted[label]

    def rows(self, final: bool) -> list[list]:
        if self._unslotted:
            self._slot_groups()
        ops, dtypes, out = self.ops, self.dtypes, []
        for step, op, start, dur, nbytes, count, dtype, group, seq, tag, root in self.module.drain(
            final
        ):
            label = _labels.get(group, "unknown")
            out.append(
                [
                    step, Kind.COLLECTIVE, ops.get(op, "unknown"), start, dur if dur >= 0 else None,
                    nbytes, count, dtypes.get(dtype, ""), label, seq, tag_named(tag),
                    self.global_rank(label, root) if root >= 0 else -1,
                ]
            )  # fmt: skip
        for text in self.module.take_errors():
            self.on_error(text)
        return out
