"""When a collective completed, as the host sees it, at the least cost per call.

An async collective (DDP's buckets, functional collectives, ``async_op=True``) completes
when its work's future does. A sync one completes when the caller's ``Work.wait`` returns:
the probe wraps that method, which costs less than a future callback and also serves the
works whose backend has no future (gloo's reduce-scatter, send and recv). A caller that
waits in C++ issues its next collective only after the wait, so the thread's next collective,
or the caller's return (``settle``), completes it. Not c10d's ``broadcast_coalesced`` (DDP's
broadcasts): it keeps two buckets in flight and waits for the first after issuing the second,
but its works have a future on gloo and NCCL, which completes each when it really does.

The same wrapper records when the host waited on a send's or recv's work (``on_wait``,
probe/p2p.py): the time a pipeline stage is blocked on its peer, and tells the C++ side
(``native_waited``) that a work of its own rows was waited for.

The probe never calls ``wait`` itself: the work is the caller's, and gloo's reduce-scatter
copies its result into the caller's output in each ``wait`` (a second one writes over what
the caller did since, and bumps the output's version: autograd then refuses a view of it).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from scalescope.probe.recorder import Recorder, WaitNote

_DUR = 4
"""Index of dur_ns in a recorder row."""


class HostCompletions:
    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self._awaiting: dict[int, tuple[Any, list, tuple[int, ...]]] = {}
        """id(work) -> (work, row, its tensors' storages) of collectives without a future
        whose wait is still to come."""
        self._local = threading.local()
        self._saved_wait: Any = None
        self._waits: dict[int, tuple[Any, WaitNote]] = {}
        """id(work) -> (work, what to record of its wait): sends and receives (probe/p2p.py)."""
        self.native_waited: Callable[[Any], None] | None = None
        """The C++ side's ``waited``: its works without a future complete at their wait."""
        self._by_storage: dict[int, int] = {}
        """A tensor's storage -> id(work) of the awaited collective issued with it."""
        self._library: Any = None

    def install(self) -> None:
        work_class = getattr(dist, "Work", None)
        if work_class is None or self._saved_wait is not None:
            return
        self._saved_wait = original = work_class.wait
        complete = self._complete
        waits, waited, clock = self._waits, self.recorder.waited, time.perf_counter_ns

        def wait(work: Any, *args: Any, **kwargs: Any) -> Any:
            begin = clock() if waits else 0
            result = original(work, *args, **kwargs)
            if self.native_waited is not None:
                self.native_waited(work)
            complete(id(work), clock())
            if waits:
                noted = waits.pop(id(work), None)
                if noted is not None and noted[0] is work:
                    waited(noted[1], begin, clock())
            return result

        work_class.wait = wait

    def uninstall(self) -> None:
        if self._saved_wait is not None:
            dist.Work.wait = self._saved_wait
            self._saved_wait = None
        if self._library is not None:
            with contextlib.suppress(Exception):
                self._library._destroy()
            self._library = None
        self._awaiting.clear()
        self._waits.clear()
        self._by_storage.clear()

    def watch_tensor_waits(self) -> str:
        """A kernel of ``_c10d_functional::wait_tensor`` at the dispatcher (BackendSelect,
        which no torch kernel of it uses), for the Python hooks' way: a functional collective
        (DTensor's) is waited through that op, from Python or C++, and its gloo work has no
        future. Why it could not be registered, or ""."""
        if self._library is not None:
            return ""
        try:
            op = torch.ops._c10d_functional.wait_tensor.default
            below = torch._C.DispatchKey.BackendSelect
            library = torch.library.Library("_c10d_functional", "IMPL")

            def wait_tensor(keyset: Any, tensor: Any) -> Any:
                out = op.redispatch(keyset.remove(below), tensor)
                self.tensor_waited(tensor)
                return out

            library.impl("wait_tensor", wait_tensor, "BackendSelect", with_keyset=True)
        except Exception as exc:  # a torch without functional collectives, or this API
            return f"wait_tensor not seen: {type(exc).__name__}: {exc}"
        self._library = library
        return ""

    def tensor_waited(self, tensor: Any) -> None:
        """``wait_tensor(tensor)`` returned: the awaited collective issued with it is done."""
        try:
            work_id = self._by_storage.get(tensor.untyped_storage().data_ptr())
        except Exception:  # a tensor without storage
            return
        if work_id is not None:
            self._complete(work_id, time.perf_counter_ns())

    def _complete(self, work_id: int, end_ns: int) -> None:
        """The awaited collective of ``work_id`` is done at ``end_ns`` (if it is still
        awaited); its storages are forgotten with it."""
        entry = self._awaiting.pop(work_id, None)
        if entry is None:
            return
        _work, row, storages = entry
        for storage in storages:
            if self._by_storage.get(storage) == work_id:
                del self._by_storage[storage]
        if row[_DUR] is None:
            self.recorder.completed(row, end_ns)

    def on_wait(self, work: Any, note: WaitNote) -> None:
        """Record the host's wait on ``work`` (a send or recv) when ``Work.wait`` returns."""
        if work is None:
            return
        self.install()
        self._waits[id(work)] = (work, note)

    def watch(self, row: list, work: Any, async_op: bool, storages: tuple[int, ...] = ()) -> None:
        """Complete ``row`` when ``work`` does (a None work: it is done); ``storages``: of
        the tensors it was issued with, whose ``wait_tensor`` completes it too."""
        if work is None:
            self.recorder.completed(row, time.perf_counter_ns())
            return
        if async_op and self._on_future(row, work):
            return
        self._awaiting[id(work)] = (work, row, storages)
        for storage in storages:
            self._by_storage[storage] = id(work)
        if not async_op:
            self._local.last = work

    def _on_future(self, row: list, work: Any) -> bool:
        recorder = self.recorder
        try:
            future = work.get_future()
        except RuntimeError:  # this backend's work has no future: its wait completes it
            return False
        future.add_done_callback(lambda _f: recorder.completed(row, time.perf_counter_ns()))
        return True

    def settle(self) -> None:
        """The thread's last sync collective was waited for: complete it now if its wait
        did not (issued by a caller that waits in C++)."""
        work = getattr(self._local, "last", None)
        if work is None:
            return
        self._local.last = None
        self._complete(id(work), time.perf_counter_ns())
