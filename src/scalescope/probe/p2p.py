"""Sends and receives: the host's wait on each (``Work.wait``), recorded as a WAIT row.

A pipeline stage posts its receive (``irecv``, ``batch_isend_irecv``) and later blocks in the
work's ``wait`` until its peer's data is there. The group hooks record the op at issue and its
completion, not when the host began to wait, so that time looked like the rank's own. The
probe wraps the process group's ``send``, ``recv`` and ``recv_anysource`` methods (what every
Python send or receive reaches, ``dist.*`` and ``batch_isend_irecv`` alike), notes each work
with its op, group, peer and index, and records the wait when ``Work.wait`` returns
(probe/completion.py's wrapper, installed at the first send or recv: a run without them
pays nothing).

The index of an op is its place among this rank's ops of that name with that peer on that
group: the n-th send from A to B meets B's n-th recv from A, and the analysis joins each wait
to its op by it (analyze/layouts/p2p.py).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any

import torch.distributed as dist

from scalescope.probe.collectives import GroupNames, dtype_name
from scalescope.probe.completion import HostCompletions
from scalescope.probe.context import UNRECORDED, current_tag
from scalescope.probe.recorder import Recorder, WaitNote

METHODS = (("send", "send"), ("recv", "recv"), ("recv_anysource", "recv"))
"""The process group's methods (name, the probe's op) a send or receive goes through."""


class P2PWaits:
    def __init__(
        self, recorder: Recorder, groups: GroupNames, completions: HostCompletions | None
    ) -> None:
        """``completions``: the group hooks' (one ``Work.wait`` wrapper per process); None
        makes one of its own (the wrappers' path)."""
        self.recorder = recorder
        self.groups = groups
        self._owned = completions is None
        self.completions = completions or HostCompletions(recorder)
        self._counts: dict[tuple[str, str, int], int] = {}
        self._saved: dict[str, Callable] = {}

    def install(self) -> None:
        cls = getattr(dist, "ProcessGroup", None)
        for method, op in METHODS:
            original = getattr(cls, method, None)
            if original is None or method in self._saved:
                continue
            self._saved[method] = original
            setattr(cls, method, self._wrap(op, method == "recv_anysource", original))

    def uninstall(self) -> None:
        for method, original in self._saved.items():
            with contextlib.suppress(Exception):
                setattr(dist.ProcessGroup, method, original)
        self._saved.clear()
        if self._owned:
            self.completions.uninstall()

    def _wrap(self, op: str, any_source: bool, original: Callable) -> Callable:
        @functools.wraps(original)
        def method(pg: Any, tensors: Any, *args: Any, **kwargs: Any) -> Any:
            work = original(pg, tensors, *args, **kwargs)
            try:
                local = -1 if any_source else int(args[0] if args else _peer_kwarg(kwargs))
                self._note(op, pg, tensors, local, work)
            except Exception as exc:  # never raise inside a rank's send or recv
                text = f"a {op}'s wait not recorded: {exc!r}"
                if text not in self.recorder.errors:
                    self.recorder.errors.append(text)
            return work

        return method

    def _note(self, op: str, pg: Any, tensors: list, local: int, work: Any) -> None:
        tag = current_tag()
        if tag in UNRECORDED:
            return
        group = self.groups.label(pg)
        peer = self.groups.global_rank(group, local)
        key = (group, op, peer)
        index = self._counts.get(key, 0)
        self._counts[key] = index + 1
        if tensors and tensors[0].is_cuda:
            return  # the host does not wait for a device's transfer: its op's row is timed
        nbytes, count = sum(t.nbytes for t in tensors), sum(t.numel() for t in tensors)
        dtype = dtype_name(tensors[0]) if tensors else ""
        note = WaitNote(op, group, tag, peer, index, nbytes, count, dtype)
        self.completions.on_wait(work, note)


def _peer_kwarg(kwargs: dict) -> int:
    return int(kwargs.get("dstRank", kwargs.get("srcRank", -1)))
