"""The C++ hooks' side in Python: their groups, the thread's tag, the step, the live state,
and their rows taken into the recorder at each flush (probe/native.py builds them)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch

from scalescope.events import live_state
from scalescope.events.schema import Kind
from scalescope.probe.collectives import DTYPE_NAMES, dtype_name
from scalescope.probe.context import UNRECORDED, current_tag, mirror_tags, tag_code, tag_named
from scalescope.probe.recorder import KEPT_STAGES, SETUP_TAGS, Recorder

_labels: dict[int, str] = {}
"""The C++ hooks' group number -> its label, per process as their state is."""


def on_host(pg: Any) -> bool:
    """A gloo group on a machine without CUDA: the C++ hooks take it. NCCL, gloo beside a GPU
    (CUDA events) and MPI (whose works the C++ hooks do not know) keep the Python hooks."""
    try:
        backend = pg._get_backend_name()
    except Exception:
        return False
    return backend == "gloo" and not torch.cuda.is_available()


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
    ) -> None:
        """``ops``: the probe's op name by torch's ``HookOpName`` value; ``on_error``: told
        each problem the C++ side kept (GroupHooks says each once); ``global_rank``: a group
        label's group rank as a global rank (a send's or recv's peer)."""
        self.module = module
        self.global_rank = global_rank
        self.recorder = recorder
        self.ops = ops
        self.on_error = on_error
        self.dtypes = _dtype_names(module)
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

    def attach(self, pg: Any, hook_id: int, label: str) -> None:
        code = self._groups.get(label)
        if code is None:
            code = self._groups[label] = self.module.add_group(label)
            _labels[code] = label
        self.module.attach(pg, hook_id, code, pg.size())
        if not self.active:
            self._start()

    def detach(self, pg: Any, hook_id: int) -> None:
        self.module.detach(pg, hook_id)

    def _start(self) -> None:
        self.active = True
        mirror_tags(self.module.set_tag)
        self.module.set_tag(tag_code(current_tag()))  # this thread may be inside a tag
        self.recorder.on_step = self.module.set_step
        self.module.set_step(self.recorder.step)
        self.recorder.row_sources.append(self.rows)
        live = self.recorder.live
        if live is not None and self.module.set_live(
            str(live.path), live_state.COLLECTIVE_AT, live_state.DONE_AT, live_state.LEFT_AT,
            live_state.STAGE_AT, live_state.COLLECTIVE_NS_AT,
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
        mirror_tags(None)
        self.module.set_live("", 0, 0, 0, 0, 0)
        self.recorder.on_step = None
        if self.recorder.live is not None:
            self.recorder.live.stage_listener = None

    def rows(self, final: bool) -> list[list]:
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
