"""``batch_isend_irecv`` on the wrappers' path (a torch without group hooks).

``P2POp`` accepts only torch's own ``isend`` and ``irecv`` (it compares the function), and
``batch_isend_irecv`` calls the op a ``P2POp`` holds, choosing its keyword by ``op is isend``.
With the probe's wrappers in ``torch.distributed``, a script's ``P2POp(dist.isend, ...)``
(torch's pipelining builds them so) would hold the wrapper and be refused. So ``P2POp`` is
handed torch's functions in place of the wrappers, and ``batch_isend_irecv`` is wrapped to
record each op it issues: op, bytes, group, the global peer ``P2POp`` worked out.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable
from typing import Any

import torch.distributed as dist

from scalescope.probe.collectives import GroupNames, dtype_name
from scalescope.probe.context import current_tag
from scalescope.probe.recorder import Recorder

P2P_FUNCTIONS = ("isend", "irecv")


class BatchP2P:
    def __init__(
        self, recorder: Recorder, groups: GroupNames, complete: Callable[[list, Any], None]
    ) -> None:
        """``complete(row, work)``: completes a row when its work does (the wrappers')."""
        self.recorder = recorder
        self.groups = groups
        self.complete = complete
        self._saved: dict[str, Any] = {}

    def install(self, originals: dict[str, Callable]) -> None:
        """``originals``: torch's functions by name, whose wrappers ``torch.distributed``
        now holds."""
        cls, batch = getattr(dist, "P2POp", None), getattr(dist, "batch_isend_irecv", None)
        if cls is None or batch is None or self._saved:
            return
        torch_fn = {id(getattr(dist, n)): originals[n] for n in P2P_FUNCTIONS if n in originals}
        self._isend = originals.get("isend")

        def unwrapped(op: Any) -> Any:
            return torch_fn.get(id(op), op)

        new, init = cls.__dict__["__new__"], cls.__init__
        self._saved = {"__new__": new, "__init__": init, "batch_isend_irecv": batch}

        def p2p_new(klass: type, op: Any, *args: Any, **kwargs: Any) -> Any:
            return new.__get__(None, klass)(klass, unwrapped(op), *args, **kwargs)

        def p2p_init(op_self: Any, op: Any, *args: Any, **kwargs: Any) -> None:
            init(op_self, unwrapped(op), *args, **kwargs)

        cls.__new__ = staticmethod(p2p_new)
        cls.__init__ = p2p_init
        dist.batch_isend_irecv = self._wrap(batch)

    def uninstall(self) -> None:
        if not self._saved:
            return
        with contextlib.suppress(Exception):
            dist.P2POp.__new__ = self._saved["__new__"]
            dist.P2POp.__init__ = self._saved["__init__"]
        dist.batch_isend_irecv = self._saved["batch_isend_irecv"]
        self._saved = {}

    def _wrap(self, original: Callable) -> Callable:
        @functools.wraps(original)
        def batch_isend_irecv(p2p_op_list: list) -> Any:
            rows = [self._row(p) for p in p2p_op_list]
            works = original(p2p_op_list)
            per_op = list(works or [])
            if len(per_op) != len(rows):  # one work for the whole batch (coalesced)
                per_op = [per_op[-1] if per_op else None] * len(rows)
            for row, work in zip(rows, per_op, strict=True):
                if row is not None:
                    self.complete(row, work)
            return works

        return batch_isend_irecv

    def _row(self, p: Any) -> list | None:
        try:
            op = "send" if p.op is self._isend else "recv"
            t, group = p.tensor, self.groups.label(p.group)
            peer = -1 if p.peer is None else int(p.peer)
            start = time.perf_counter_ns()
            return self.recorder.collective(
                op, t.nbytes, t.numel(), dtype_name(t), group, current_tag(), start, peer
            )
        except Exception:  # never raise inside a rank's batch
            return None
