"""Wrappers of the torch.distributed collectives: op, message size, group, issue/completion."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from scalescope.events.live_state_writer import LiveStateWriter
from scalescope.probe.completion import HostCompletions
from scalescope.probe.context import current_tag
from scalescope.probe.cuda_timing import CudaTimings
from scalescope.probe.recorder import Recorder

Args = tuple[Any, ...]
Kwargs = dict[str, Any]


def _arg(args: Args, kwargs: Kwargs, index: int, name: str, default: Any = None) -> Any:
    if len(args) > index:
        return args[index]
    return kwargs.get(name, default)


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _sum_bytes(tensors: list[torch.Tensor]) -> int:
    return sum(_nbytes(t) for t in tensors)


def _sum_numel(tensors: list[torch.Tensor]) -> int:
    return sum(t.numel() for t in tensors)


def _group_size(group: Any) -> int:
    return dist.get_world_size(group)


# For each op: (index of the tensor that names the dtype, group index, async_op index,
# function (args, kwargs) -> (tensor, nbytes, count)) with the nccl-tests size convention.
def _single(idx: int, name: str) -> Callable[[Args, Kwargs], tuple]:
    def size(args: Args, kwargs: Kwargs) -> tuple:
        t = _arg(args, kwargs, idx, name)
        return t, _nbytes(t), t.numel()

    return size


def _all_gather(args: Args, kwargs: Kwargs) -> tuple:
    out, t = _arg(args, kwargs, 0, "tensor_list"), _arg(args, kwargs, 1, "tensor")
    return t, _nbytes(t) * len(out), t.numel() * len(out)


def _list_input(idx: int, name: str) -> Callable[[Args, Kwargs], tuple]:
    def size(args: Args, kwargs: Kwargs) -> tuple:
        tensors = _arg(args, kwargs, idx, name)
        return tensors[0], _sum_bytes(tensors), _sum_numel(tensors)

    return size


def _per_rank_times_group(gidx: int) -> Callable[[Args, Kwargs], tuple]:
    def size(args: Args, kwargs: Kwargs) -> tuple:
        t = _arg(args, kwargs, 0, "tensor")
        n = _group_size(_arg(args, kwargs, gidx, "group"))
        return t, _nbytes(t) * n, t.numel() * n

    return size


def _no_data(args: Args, kwargs: Kwargs) -> tuple:
    return None, 0, 0


# op name -> (size function, index of `group`, index of `async_op` or -1 when always sync)
OPS: dict[str, tuple[Callable[[Args, Kwargs], tuple], int, int]] = {
    "all_reduce": (_single(0, "tensor"), 2, 3),
    "broadcast": (_single(0, "tensor"), 2, 3),
    "reduce": (_single(0, "tensor"), 3, 4),
    "all_gather": (_all_gather, 2, 3),
    "all_gather_into_tensor": (_single(0, "output_tensor"), 2, 3),
    "all_gather_single": (_single(0, "output_tensor"), 2, 3),
    "reduce_scatter": (_list_input(1, "input_list"), 3, 4),
    "reduce_scatter_tensor": (_single(1, "input"), 3, 4),
    "reduce_scatter_single": (_single(1, "input"), 3, 4),
    "all_to_all": (_list_input(1, "input_tensor_list"), 2, 3),
    "all_to_all_single": (_single(1, "input"), 4, 5),
    "gather": (_per_rank_times_group(3), 3, 4),
    "scatter": (_per_rank_times_group(3), 3, 4),
    "barrier": (_no_data, 0, 1),
    "send": (_single(0, "tensor"), 2, -1),
    "recv": (_single(0, "tensor"), 2, -1),
    "isend": (_single(0, "tensor"), 2, -2),
    "irecv": (_single(0, "tensor"), 2, -2),
}
"""async_op index -2 means the op always returns a Work (isend/irecv)."""

_NAMES = {
    "all_gather_into_tensor": "all_gather",
    "all_gather_single": "all_gather",
    "reduce_scatter_tensor": "reduce_scatter",
    "reduce_scatter_single": "reduce_scatter",
    "all_to_all_single": "all_to_all",
    "isend": "send",
    "irecv": "recv",
}


class GroupNames:
    """Stable, cheap labels for process groups: the group name torch gave it; and, for the
    rank's meta file, each labelled group's members and mesh dimension."""

    def __init__(self) -> None:
        self._cache: dict[int, str] = {}
        self.members: dict[str, list[int]] = {}
        self.dims: dict[str, str] = {}
        self.backends: dict[str, str] = {}
        self._objects: dict[str, Any] = {}
        self._tries: dict[str, int] = {}
        self.live: LiveStateWriter | None = None
        """The rank's live state, where groups of evenly spaced members get a time slot."""
        self._slots: dict[str, int] = {}

    def label(self, group: Any) -> str:
        if group is None:
            group = dist.group.WORLD
        key = id(group)
        name = self._cache.get(key)
        if name is None:
            name = _group_name(group)
            self._cache[key] = name
            self._objects[name] = group
            self.backends[name] = _backend(group)
        if not self.members.get(name) and self._tries.get(name, 0) < MEMBER_TRIES:
            self._tries[name] = self._tries.get(name, 0) + 1  # torch may know them later
            self.members[name] = _members(group)
        return name

    def global_rank(self, label: str, local: int) -> int:
        """The global rank of group rank ``local`` of the group labelled ``label``; -1 where
        ``local`` is -1 or the members are not known."""
        if local < 0:
            return -1
        members = self.members.get(label)
        if not members and label in self._objects:
            members = self.members[label] = _members(self._objects[label])
        return members[local] if members and local < len(members) else -1

    def live_slot(self, label: str) -> int:
        """The offset of the group's time slot in the live state: 0 for none (the world,
        unevenly spaced members, every slot taken, no live state), -1 while its members are
        not known."""
        at = self._slots.get(label)
        if at is not None:
            return at
        members = self.members.get(label)
        if not members:
            return -1 if self.live is not None else 0
        world = dist.get_world_size() if dist.is_initialized() else 0
        at = self._slots[label] = self.live.group_slot(members, world) if self.live else 0
        return at

    def name_dim(self, group: Any, dim: str) -> None:
        """``group`` is ``dim`` of a DeviceMesh (probe/mesh.py)."""
        self.dims[self.label(group)] = dim

    def described(self) -> dict[str, tuple[list[int], str, str]]:
        """label -> (members, mesh dimension or "", backend or ""); groups destroyed before
        their members were known get [] (the analysis then takes the ranks that recorded
        rows on them)."""
        for name, group in self._objects.items():
            if not self.members.get(name):
                self.members[name] = _members(group)
        return {
            n: (ranks, self.dims.get(n, ""), self.backends.get(n, ""))
            for n, ranks in self.members.items()
        }


def _backend(group: Any) -> str:
    """``gloo``, ``nccl``, ... (``cpu:gloo,cuda:nccl`` for a group with both); "" where
    torch cannot say."""
    try:
        return str(dist.get_backend(group))
    except Exception:
        return ""


def _members(group: Any) -> list[int]:
    """The group's global ranks; [] where torch cannot say (a destroyed or foreign group)."""
    try:
        return [int(r) for r in dist.get_process_group_ranks(group)]
    except Exception:
        return []


MEMBER_TRIES = 3
"""Times a group's members are asked for before its end: a group's first label can come
before torch records its ranks (a hook attached at its registration)."""

UNKNOWN_GROUP = "unknown"
"""The label of a group torch does not name (the collective is recorded all the same)."""


def _group_name(group: Any) -> str:
    try:
        name = str(dist.distributed_c10d._get_process_group_name(group))
    except Exception:
        name = ""
    if name and name != "None":  # torch's answer for a group it does not know
        return name
    try:
        return str(group.group_name or UNKNOWN_GROUP)
    except Exception:
        return UNKNOWN_GROUP


DTYPE_NAMES: dict[torch.dtype, str] = {}
"""``float32`` for torch.float32: each dtype's name, made once."""


def dtype_name(t: torch.Tensor | None) -> str:
    if t is None:
        return ""
    name = DTYPE_NAMES.get(t.dtype)
    if name is None:
        name = DTYPE_NAMES[t.dtype] = str(t.dtype).removeprefix("torch.")
    return name


class CollectiveWrapper:
    """Builds the wrapper of one op; ``install`` replaces the functions in torch.distributed."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.groups = GroupNames()
        self._originals: dict[str, Callable] = {}
        self.cuda = CudaTimings()
        self.completions: HostCompletions | None = None
        """Completes an async call whose work has no future (gloo's send and recv) when its
        ``Work.wait`` returns; None: such a row stays incomplete."""

    def install(self) -> None:
        for op, spec in OPS.items():
            original = getattr(dist, op, None)
            if original is None:
                continue
            self._originals[op] = original
            setattr(dist, op, self._wrap(_NAMES.get(op, op), original, *spec))

    @property
    def originals(self) -> dict[str, Callable]:
        """torch's functions whose wrappers ``torch.distributed`` holds now, by name."""
        return dict(self._originals)

    def uninstall(self) -> None:
        for op, original in self._originals.items():
            setattr(dist, op, original)
        self._originals.clear()

    def _wrap(self, op: str, original: Callable, size_fn, gidx: int, aidx: int) -> Callable:
        recorder = self.recorder

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                tensor, nbytes, count = size_fn(args, kwargs)
                group = self.groups.label(_arg(args, kwargs, gidx, "group"))
                is_async = aidx == -2 or (aidx >= 0 and bool(_arg(args, kwargs, aidx, "async_op")))
            except Exception:
                return original(*args, **kwargs)
            on_device = tensor is not None and tensor.is_cuda
            peer = self._peer(op, group, args, kwargs)
            start = time.perf_counter_ns()
            row = recorder.collective(
                op, nbytes, count, dtype_name(tensor), group, current_tag(), start, peer
            )
            timer = self.cuda.start() if on_device else None
            result = original(*args, **kwargs)
            work = result if is_async else None
            if timer is not None:
                self.cuda.finish(row, timer, work)
                recorder.left(row, time.perf_counter_ns())
            else:
                self.complete(row, work)
            return result

        return wrapper

    def complete(self, row: list, work: Any) -> None:
        """Set the row's duration at completion: now for a sync call, else from the work's
        future, else when its wait returns (``completions``)."""
        recorder = self.recorder
        if work is None:
            recorder.completed(row, time.perf_counter_ns())
            return

        def done(_fut: Any) -> None:
            recorder.completed(row, time.perf_counter_ns())

        try:
            work.get_future().add_done_callback(done)
            return
        except Exception:
            pass
        if self.completions is not None:  # else completion unknown: the row stays -1
            self.completions.install()
            self.completions.watch(row, work, async_op=True)

    def _peer(self, op: str, group: str, args: Args, kwargs: Kwargs) -> int:
        """A send's or recv's partner as a global rank: ``dst``/``src`` are global,
        ``group_dst``/``group_src`` (newer torch) group ranks; -1 for any other op."""
        if op not in P2P_PEERS:
            return -1
        try:
            global_peer = _arg(args, kwargs, 1, P2P_PEERS[op])
            if global_peer is not None:
                return int(global_peer)
            local = kwargs.get(f"group_{P2P_PEERS[op]}")
            return -1 if local is None else self.groups.global_rank(group, int(local))
        except Exception:
            return -1


P2P_PEERS = {"send": "dst", "recv": "src"}
"""The probe's p2p op names -> the argument naming the partner (``dst``, ``src``)."""
