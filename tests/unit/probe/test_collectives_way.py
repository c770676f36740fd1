"""Which way a rank sees collectives (hooks, the c10d ops intercepted at the dispatcher, or
the wrappers), what ``SCALESCOPE_COLLECTIVES`` asks, and the probe falling back to the
wrappers, saying so once, where the c10d ops cannot be intercepted. Real one-rank gloo."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
import torch
import torch.distributed as dist

from scalescope.events import Kind
from scalescope.events.files import events_path
from scalescope.probe import group_hooks, native
from scalescope.probe.install import WAY_VARIABLE, Probe, collectives_way

needs_built = pytest.mark.skipif(
    native.load() is None,
    reason="the probe's C++ side is not built (python -m scalescope.probe.native)",
)
needs_hooks = pytest.mark.skipif(not group_hooks.available(), reason="torch has no group hooks")


def way(monkeypatch: pytest.MonkeyPatch, asked: str | None) -> tuple[str, list[str]]:
    if asked is None:
        monkeypatch.delenv(WAY_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(WAY_VARIABLE, asked)
    errors: list[str] = []
    return collectives_way(errors), errors


@needs_hooks
@needs_built
def test_each_way_asked_is_taken(monkeypatch) -> None:
    assert way(monkeypatch, None) == ("hooks", [])
    assert way(monkeypatch, "hooks") == ("hooks", [])
    assert way(monkeypatch, "dispatcher") == ("dispatcher", [])
    assert way(monkeypatch, "wrappers") == ("wrappers", [])


@needs_hooks
def test_an_unknown_way_is_said_and_ignored(monkeypatch) -> None:
    chosen, errors = way(monkeypatch, "hook")
    assert chosen == "hooks"
    assert errors == [
        "SCALESCOPE_COLLECTIVES='hook' is not one of hooks, dispatcher, wrappers: ignored"
    ]


@needs_hooks
def test_the_dispatcher_asked_without_the_cpp_side_says_why(monkeypatch) -> None:
    monkeypatch.setattr(native, "load", lambda: None)
    chosen, errors = way(monkeypatch, "dispatcher")
    assert chosen == "hooks"
    assert errors == [
        "SCALESCOPE_COLLECTIVES=dispatcher: the probe's C++ module is not built "
        "(python -m scalescope.probe.native)"
    ]


def test_without_hooks_or_the_cpp_side_the_wrappers_record(monkeypatch) -> None:
    """A torch without process-group hooks on a machine that could not build: the wrappers."""
    monkeypatch.setattr(group_hooks, "available", lambda: False)
    monkeypatch.setattr(native, "load", lambda: None)
    assert way(monkeypatch, None) == ("wrappers", [])


@needs_built
def test_without_hooks_the_dispatcher_is_the_default(monkeypatch) -> None:
    monkeypatch.setattr(group_hooks, "available", lambda: False)
    assert way(monkeypatch, None) == ("dispatcher", [])
    chosen, errors = way(monkeypatch, "hooks")
    assert chosen == "dispatcher"
    assert errors == ["SCALESCOPE_COLLECTIVES=hooks: this torch has no process-group hooks"]


def one_rank(probe: Probe, tmp_path: Path) -> None:
    """Install ``probe``, run one all_reduce and one step on a one-rank group, close it."""
    probe.install()
    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        dist.all_reduce(torch.ones(4))
        probe.recorder.end_step(0)
    finally:
        probe.close()
        dist.destroy_process_group()


def all_reduce_bytes(run_dir: Path) -> list[int]:
    """nbytes of each all_reduce row rank 0 wrote (its event stream, as the run reads it)."""
    table = pa.ipc.open_stream(pa.memory_map(str(events_path(run_dir, 0)))).read_all()
    rows = table.to_pydict()
    return [n for kind, name, n in zip(rows["kind"], rows["name"], rows["nbytes"], strict=True)
            if kind == int(Kind.COLLECTIVE) and name == "all_reduce"]  # fmt: skip


@needs_built
def test_the_probe_records_through_the_dispatcher(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv(WAY_VARIABLE, "dispatcher")
    probe = Probe(tmp_path, 0)
    assert probe.way == "dispatcher" and probe.group_hooks is None
    assert probe.ddp.settle is not None, "DDP's broadcasts are the C++ side's to record"
    one_rank(probe, tmp_path)
    assert probe.errors == []
    assert all_reduce_bytes(tmp_path) == [16]


@needs_built
def test_ops_that_cannot_be_intercepted_fall_back_to_the_wrappers_once(
    monkeypatch, tmp_path: Path
) -> None:
    module = native.load()
    monkeypatch.setattr(module, "intercept", lambda specs: ["allreduce_: a broken torch"])
    monkeypatch.setattr(module, "intercepted", lambda: [])
    monkeypatch.setenv(WAY_VARIABLE, "dispatcher")
    probe = Probe(tmp_path, 0)
    one_rank(probe, tmp_path)
    assert probe.way == "wrappers" and probe.dispatched is None and probe.ddp.settle is None
    assert all_reduce_bytes(tmp_path) == [16], "the wrappers recorded it"
    assert probe.errors == [
        "a c10d op not intercepted: allreduce_: a broken torch",
        f"the c10d ops could not be intercepted (torch {torch.__version__}): the probe "
        "records through its dist.* wrappers",
    ]
