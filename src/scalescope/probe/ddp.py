"""DistributedDataParallel: tag its broadcasts, time its forward, observe its gradient buckets.

The probe registers a comm hook that runs DDP's default allreduce (or the hook the user
registers later, which it then wraps): it marks each bucket's issue (the last one starts the
exposed wait) and tags the bucket's collective ``gradients`` for the group hooks that record
it (on a torch without them, the wrapped ``dist.all_reduce``). DDP's construction and its
pre-forward are tagged too (``ddp_setup``, ``ddp_buckets``): their own checks are left out,
their coalesced broadcasts recorded as ``parameters`` and ``buffers``.

``scalescope tune`` sets DDP's fusion knobs through the environment (``DDP_ENV``): when set,
they replace the script's own ``bucket_cap_mb`` and ``gradient_as_bucket_view``, and a
compression hook (fp16/bf16) is registered unless the script registers its own.
"""

from __future__ import annotations

import functools
import os
import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

from scalescope.probe.collectives import GroupNames
from scalescope.probe.context import DDP_BUCKETS, DDP_SETUP, current_tag, tagged
from scalescope.probe.recorder import Recorder


class CommHookState:
    """State of the probe's comm hook: the hook that really reduces, and its state."""

    def __init__(self, process_group: Any, on_bucket: Any) -> None:
        self.process_group = process_group
        self.on_bucket = on_bucket
        self.inner_hook: Any = default_hooks.allreduce_hook
        self.inner_state: Any = process_group
        self.user_registered = False


def probe_comm_hook(state, bucket):  # noqa: ANN001, ANN201
    """Left unannotated: DDP rejects a hook whose annotations are strings (PEP 563)."""
    state.on_bucket()
    with tagged("gradients"):
        return state.inner_hook(state.inner_state, bucket)


BROADCAST_TAGS = {DDP_SETUP: "parameters", "user": "buffers", DDP_BUCKETS: "buffers"}
"""DDP's coalesced broadcasts: the parameters at construction, the buffers before forward."""

BUCKET_CAP_ENV = "SCALESCOPE_DDP_BUCKET_CAP_MB"
BUCKET_VIEW_ENV = "SCALESCOPE_DDP_GRADIENT_AS_BUCKET_VIEW"
COMM_HOOK_ENV = "SCALESCOPE_DDP_COMM_HOOK"
DDP_ENV = (BUCKET_CAP_ENV, BUCKET_VIEW_ENV, COMM_HOOK_ENV)
COMPRESS_HOOKS = {
    "fp16": default_hooks.fp16_compress_hook,
    "bf16": default_hooks.bf16_compress_hook,
}


def ddp_overrides(environ: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """DDP constructor arguments set by the environment; a value that does not parse is left
    out (the script's own argument stands)."""
    out: dict[str, Any] = {}
    try:
        if environ.get(BUCKET_CAP_ENV):
            out["bucket_cap_mb"] = float(environ[BUCKET_CAP_ENV])
    except ValueError:
        pass
    view = environ.get(BUCKET_VIEW_ENV, "").lower()
    if view in ("1", "true", "0", "false"):
        out["gradient_as_bucket_view"] = view in ("1", "true")
    return out


_BUILTIN = {
    "ALLREDUCE": default_hooks.allreduce_hook,
    "FP16_COMPRESS": default_hooks.fp16_compress_hook,
}


class DDPPatch:
    """Patches the DDP class (construction, comm hook registration) for this process."""

    def __init__(
        self,
        recorder: Recorder,
        phases: Any,
        groups: GroupNames,
        settle: Callable[[], None] | None = None,
    ) -> None:
        self.recorder = recorder
        self.phases = phases
        self.groups = groups
        self.settle = settle
        """Where the group hooks record each broadcast (the patch then only tags them): what
        completes the last one when the C++ call returns. None: the patch records them."""
        self._saved: dict[str, Any] = {}

    def install(self) -> None:
        self._saved = {
            "__init__": DDP.__init__,
            "register_comm_hook": DDP.register_comm_hook,
            "_register_builtin_comm_hook": DDP._register_builtin_comm_hook,
        }
        self._saved_broadcast = dist._broadcast_coalesced
        DDP.__init__ = self._patched_init(DDP.__init__)
        if hasattr(DDP, "_pre_forward"):
            self._saved["_pre_forward"] = DDP._pre_forward
            DDP._pre_forward = _tagging(DDP._pre_forward, DDP_BUCKETS)
        DDP.register_comm_hook = _patched_register(DDP.register_comm_hook)
        DDP._register_builtin_comm_hook = _patched_builtin(DDP._register_builtin_comm_hook)
        dist._broadcast_coalesced = self._patched_broadcast(dist._broadcast_coalesced)

    def uninstall(self) -> None:
        for name, value in self._saved.items():
            setattr(DDP, name, value)
        if self._saved:
            dist._broadcast_coalesced = self._saved_broadcast
        self._saved = {}

    def _patched_init(self, original: Any) -> Any:
        patch = self

        @functools.wraps(original)
        def __init__(ddp: DDP, *args: Any, **kwargs: Any) -> None:
            kwargs.update(ddp_overrides())
            caught: list[warnings.WarningMessage] = []
            try:
                with tagged(DDP_SETUP), warnings.catch_warnings(record=True) as caught:
                    original(ddp, *args, **kwargs)
            finally:  # from the script's line that built the DDP, not this one
                for w in caught:
                    warnings.warn(w.message, w.category, stacklevel=2)
            patch.attach(ddp)

        return __init__

    def attach(self, ddp: DDP) -> None:
        self.phases.watch_forward(ddp)
        state = CommHookState(ddp.process_group, self.phases.on_bucket)
        try:
            self._saved["register_comm_hook"](ddp, state, probe_comm_hook)
        except Exception as exc:
            self.recorder.errors.append(f"DDP gradient buckets not observed: {exc}")
            return
        ddp._scalescope_comm = state
        compress = COMPRESS_HOOKS.get(os.environ.get(COMM_HOOK_ENV, ""))
        if compress is not None:
            state.inner_hook, state.inner_state = compress, ddp.process_group

    def _patched_broadcast(self, original: Any) -> Any:
        """DDP's coalesced broadcasts: parameters at construction, buffers before forward."""
        recorder, groups, patch = self.recorder, self.groups, self

        @functools.wraps(original)
        def broadcast_coalesced(
            process_group: Any, tensors: list, buffer_size: int, *args: Any, **kwargs: Any
        ) -> Any:
            tag = BROADCAST_TAGS.get(current_tag(), current_tag())
            if patch.settle is not None:
                with tagged(tag):
                    result = original(process_group, tensors, buffer_size, *args, **kwargs)
                patch.settle()
                return result
            group = groups.label(process_group)
            start = time.perf_counter_ns()
            rows = [
                recorder.collective("broadcast", nbytes, count, dtype, group, tag, start)
                for dtype, nbytes, count in coalesced_chunks(tensors, buffer_size)
            ]
            result = original(process_group, tensors, buffer_size, *args, **kwargs)
            end = time.perf_counter_ns()
            share_rows(rows, start, end)
            for row in rows:
                recorder.done(row)
            if rows:
                recorder.left(rows[-1], end)
            return result

        return broadcast_coalesced


def coalesced_chunks(tensors: list, limit: int) -> list[tuple[str, int, int]]:
    """(dtype, nbytes, count) of each broadcast c10d's broadcast_coalesced issues, in order.

    As torch's ``take_tensors``: tensors are grouped by dtype; a group that reaches the
    size limit goes out at once, the rest at the end in dtype-id order.
    """
    chunks: list[tuple[str, int, int]] = []
    open_groups: dict[Any, list[int]] = {}
    for t in tensors:
        group = open_groups.setdefault(t.dtype, [0, 0])
        group[0] += t.numel() * t.element_size()
        group[1] += t.numel()
        if group[0] >= limit:
            chunks.append((_dtype_name(t.dtype), group[0], group[1]))
            del open_groups[t.dtype]
    for dtype in sorted(open_groups, key=_dtype_id):
        nbytes, count = open_groups[dtype]
        chunks.append((_dtype_name(dtype), nbytes, count))
    return chunks


_SCALAR_TYPE_ORDER = [
    torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
    torch.float32, torch.float64, torch.complex32, torch.complex64, torch.complex128,
    torch.bool, torch.qint8, torch.quint8, torch.qint32, torch.bfloat16,
]  # fmt: skip


def _dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def _dtype_id(dtype: Any) -> int:
    """Position in c10's ScalarType enum, which orders take_tensors' leftover groups."""
    return _SCALAR_TYPE_ORDER.index(dtype) if dtype in _SCALAR_TYPE_ORDER else 1000


def share_rows(rows: list[list], start_ns: int, end_ns: int) -> None:
    """One C++ call issues every chunk: each gets an equal, consecutive slice of its time."""
    if not rows:
        return
    span = (end_ns - start_ns) / len(rows)
    for i, row in enumerate(rows):
        row[3] = start_ns + int(i * span)
        row[4] = int(span)


def _tagging(original: Any, tag: str) -> Any:
    @functools.wraps(original)
    def method(*args: Any, **kwargs: Any) -> Any:
        with tagged(tag):
            return original(*args, **kwargs)

    return method


def _patched_register(original: Any) -> Any:
    @functools.wraps(original)
    def register_comm_hook(ddp: DDP, state: object, hook: Any) -> None:
        probe_state = getattr(ddp, "_scalescope_comm", None)
        if probe_state is None:
            return original(ddp, state, hook)
        if probe_state.user_registered:
            raise RuntimeError(
                "register_comm_hook or register_builtin_comm_hook can only be called once."
            )
        probe_state.inner_hook, probe_state.inner_state = hook, state
        probe_state.user_registered = True

    return register_comm_hook


def _patched_builtin(original: Any) -> Any:
    @functools.wraps(original)
    def register_builtin(ddp: DDP, comm_hook_type: Any) -> None:
        probe_state = getattr(ddp, "_scalescope_comm", None)
        hook = _BUILTIN.get(getattr(comm_hook_type, "name", ""))
        if probe_state is None or hook is None:
            return original(ddp, comm_hook_type)
        DDP.register_comm_hook(ddp, ddp.process_group, hook)

    return register_builtin
