"""Node files: each node's summary of its ranks' rows, one pair of Arrow IPC files per window
of steps, which the analysis of a large run reads instead of every rank's rows
(docs/schema.md, "Node files"; issue 50).

A window's ``steps`` file holds one row per rank and step (rank, step, start_ns, dur_ns,
samples); its ``colls`` file one row per (step, group, op, size class) of the collectives the
node's ranks completed (``COLLS_SCHEMA``). ``node_events/nodes.json`` names the window's length
and each node's host and ranks. Written whole (a temporary file renamed), in the IPC *file*
format so that ``pyarrow.dataset`` and other engines scan them; a node relay writes one per
window as the window ends. events/node_stats.py builds them from the node's rank files.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import msgspec
import pyarrow as pa

from scalescope.events.files import NODE_EVENTS_DIR, NODE_MANIFEST, node_file_path

FORMAT = "node_events/1"
TABLES = ("steps", "colls")

STEPS_SCHEMA = pa.schema(
    [
        ("rank", pa.int32()),
        ("step", pa.int32()),
        ("start_ns", pa.int64()),
        ("dur_ns", pa.int64()),
        ("samples", pa.int64()),
    ]
)
"""One row per rank and step, on the rank's own clock."""

COLLS_SCHEMA = pa.schema(
    [
        ("step", pa.int32()),
        ("group", pa.string()),
        ("op", pa.string()),
        ("size_class", pa.int8()),
        ("ranks", pa.int32()),
        ("calls", pa.int32()),
        ("bytes", pa.int64()),
        ("call_sum_ns", pa.int64()),
        ("call_max_ns", pa.int64()),
        ("transfer_min_ns", pa.int64()),
        ("arrive_min_ns", pa.int64()),
        ("arrive_max_ns", pa.int64()),
        ("arrive_sum_ns", pa.int64()),
        ("last_rank", pa.int32()),
    ]
)
"""Per (step, group, op, size class: floor(log2(bytes per call)), -1 for none) over the
node's completed calls: how many of its ranks and calls, bytes, the time in the call (issue to
completion: sum, max), the least time from arrival to completion (the group's transfer is the
least over its nodes: the last to arrive waits for nobody), the arrival's offset from the
rank's step start (min, max, sum; a rank arrives at its issue or at the completion of its
previous call on the group, whichever is later) and the rank that arrived last (the lowest
of a tie)."""

SCHEMAS = {"steps": STEPS_SCHEMA, "colls": COLLS_SCHEMA}


class NodeFileError(ValueError):
    """A node file or the manifest is missing or cannot be read: one line, naming it."""


class NodeEntry(msgspec.Struct, kw_only=True):
    node: int
    host: str
    ranks: list[int]


class NodeManifest(msgspec.Struct, kw_only=True):
    format: str = FORMAT
    window_steps: int
    windows: list[int]
    """The first step of each window written."""
    nodes: list[NodeEntry]
    world_size: int


def manifest_path(run_dir: Path) -> Path:
    return Path(run_dir) / NODE_EVENTS_DIR / NODE_MANIFEST


def has_node_files(run_dir: Path) -> bool:
    return manifest_path(run_dir).is_file()


def write_manifest(run_dir: Path, manifest: NodeManifest) -> Path:
    path = manifest_path(run_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{socket.gethostname()}.{os.getpid()}.tmp")  # nodes share it
    tmp.write_bytes(msgspec.json.format(msgspec.json.encode(manifest), indent=2))
    os.replace(tmp, path)
    return path


def read_manifest(run_dir: Path) -> NodeManifest:
    path = manifest_path(run_dir)
    try:
        manifest = msgspec.json.decode(path.read_bytes(), type=NodeManifest)
    except FileNotFoundError:
        raise NodeFileError(f"{path}: missing (a run with node files has one)") from None
    except (OSError, msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise NodeFileError(f"{path}: not a node manifest ({exc})") from None
    if manifest.format != FORMAT:
        raise NodeFileError(f"{path}: format {manifest.format!r}, expected {FORMAT!r}")
    return manifest


class NodeFileWriter:
    """One window's file of one node, written batch by batch, renamed into place at close."""

    def __init__(self, path: Path, table: str) -> None:
        self.path = path
        self.tmp = path.with_name(path.name + ".tmp")
        path.parent.mkdir(parents=True, exist_ok=True)
        self._sink = pa.OSFile(str(self.tmp), "wb")
        self._writer = pa.ipc.new_file(self._sink, SCHEMAS[table])

    def write(self, batch: pa.RecordBatch | pa.Table) -> None:
        if isinstance(batch, pa.Table):
            self._writer.write_table(batch)
        else:
            self._writer.write_batch(batch)

    def close(self) -> None:
        self._writer.close()
        self._sink.close()
        os.replace(self.tmp, self.path)


def write_node_table(path: Path, table: str, data: pa.Table) -> Path:
    writer = NodeFileWriter(path, table)
    writer.write(data)
    writer.close()
    return path


def node_paths(run_dir: Path, manifest: NodeManifest, table: str) -> list[Path]:
    """Every node's file of ``table`` in every window, window by window, in node order;
    NodeFileError naming the first one missing."""
    paths = [node_file_path(run_dir, w, e.node, table) for w in manifest.windows
             for e in manifest.nodes]  # fmt: skip
    for path in paths:
        if not path.is_file():
            raise NodeFileError(f"{path}: missing (the manifest lists node and window)")
    return paths


def read_node_table(path: Path, table: str) -> pa.Table:
    """One node file, whole (a window of one node: bounded); NodeFileError when it is cut or
    not of ``table``'s schema."""
    try:
        with pa.memory_map(str(path)) as source:
            data = pa.ipc.open_file(source).read_all()
    except FileNotFoundError:
        raise NodeFileError(f"{path}: missing") from None
    except (pa.ArrowException, OSError) as exc:
        raise NodeFileError(f"{path}: not a complete node file ({exc})") from None
    if not data.schema.equals(SCHEMAS[table]):
        raise NodeFileError(f"{path}: not a node {table} file (schema differs)")
    return data


def iter_node_tables(
    run_dir: Path, manifest: NodeManifest, table: str
) -> Iterator[tuple[int, int, pa.Table]]:
    """(window's first step, node, its table) for every file of ``table``: one at a time."""
    node_paths(run_dir, manifest, table)
    for first in manifest.windows:
        for entry in manifest.nodes:
            path = node_file_path(run_dir, first, entry.node, table)
            yield first, entry.node, read_node_table(path, table)


@dataclass(frozen=True)
class NodeWindow:
    """A node's two tables of one window."""

    steps: pa.Table
    colls: pa.Table
