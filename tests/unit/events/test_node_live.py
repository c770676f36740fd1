"""events/node_live.py: node files written while the ranks' files grow. Replayed 20 steps per
message, as the probe flushes: no window before every rank passed it, a manifest that names
only files that exist after every poll, and at the end exactly the files
``build_run_node_files`` builds from the whole rank files; the manifest of several nodes; a
bad window length is one line."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))

from scalescope.events.files import events_path, node_file_path  # noqa: E402
from scalescope.events.node_file import (  # noqa: E402
    NodeEntry,
    iter_node_tables,
    node_paths,
    read_manifest,
    read_node_table,
)
from scalescope.events.node_live import (  # noqa: E402
    NodeFollower,
    NodePart,
    merge_manifest,
    read_parts,
)
from scalescope.events.node_stats import build_run_node_files  # noqa: E402
from scalescope.events.reader import read_event_stream  # noqa: E402
from scalescope.launch.run.node_files import WINDOW_ENV, window_steps  # noqa: E402
from synthetic_nodes import write_scale_run  # noqa: E402

RANKS, STEPS, WINDOW = 8, 130, 40
"""Node 0's ranks, of a pipeline of two nodes."""


def messages(table: pa.Table) -> list[pa.Table]:
    step = table.column("step").to_numpy()
    return [table.filter(pa.array((step >= a) & (step < a + 20))) for a in range(-1, STEPS, 20)]


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    """Node 0 of a pipeline run with a slow link (sends, receives and all-reduces on several
    groups) appended into a fresh directory message by message, rank 7 lagging one message
    behind; the manifest's windows after each poll."""
    tmp = tmp_path_factory.mktemp("live")
    src, dst = tmp / "src", tmp / "dst"
    write_scale_run(src, 2 * RANKS, STEPS, "slow_link", seed=5, layout="pipeline", sample_every=0)
    (dst / "events").mkdir(parents=True)
    parts = {r: messages(read_event_stream(events_path(src, r)).table) for r in range(RANKS)}
    sinks = {r: pa.OSFile(str(events_path(dst, r)), "wb") for r in range(RANKS)}
    writers = {r: pa.ipc.new_stream(sinks[r], parts[r][0].schema) for r in range(RANKS)}
    follower = NodeFollower(dst, 0, WINDOW, 2 * RANKS, RANKS)
    follower.add_ranks(list(range(RANKS)))
    seen = []
    for i in range(len(parts[0]) + 1):
        for r in range(RANKS):
            j = i - 1 if r == 7 else i
            if 0 <= j < len(parts[r]):
                writers[r].write_table(parts[r][j])
                sinks[r].flush()
        follower.poll()
        if follower.written:
            manifest = read_manifest(dst)
            node_paths(dst, manifest, "colls")  # names only files that exist
            seen.append((i, list(manifest.windows)))
    for r in range(RANKS):
        writers[r].close()
        sinks[r].close()
    follower.finish()
    part = read_parts(dst)[0]
    assert part.ended and part.windows == follower.written and part.cpu_s > 0
    return src, dst, seen


def test_a_window_is_written_once_every_rank_passed_it(replayed):
    _, _, seen = replayed
    # rank 7 lags one message (20 steps): window [0, 40) needs its step 40, in its message
    # of steps 39-58, appended at the fourth round (i = 3)
    first = dict((tuple(w), i) for i, w in reversed(seen))
    assert first[(0,)] == 3, seen
    assert first[(0, 40)] == 5, seen


def test_the_files_equal_those_built_from_the_whole_rank_files(replayed, tmp_path):
    src, dst, _ = replayed
    live = read_manifest(dst)
    built = build_run_node_files(src, WINDOW, out=tmp_path)
    assert live.windows == [0, 40, 80, 120] and live.nodes[0].ranks == list(range(RANKS))
    for table in ("steps", "colls"):
        ours = {(w, n): t for w, n, t in iter_node_tables(dst, live, table)}
        theirs = {(w, n): t for w, n, t in iter_node_tables(tmp_path, built, table) if n == 0}
        assert set(ours) == set(theirs)
        for key, data in ours.items():
            assert data.num_rows > 0 and data.equals(theirs[key]), (table, key)


def part(run_dir: Path, node: int, windows: list[int], ended: bool) -> None:
    follower = NodeFollower(run_dir, node, 10, 4, 2, host=f"h{node}")
    follower.add_ranks([2 * node, 2 * node + 1])
    follower.written = windows
    for first in windows:
        for table in ("steps", "colls"):
            path = node_file_path(run_dir, first, node, table)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"")  # present is what the manifest checks
    follower.write_part(ended)


def test_the_manifest_lists_windows_every_node_wrote_or_ended_before(tmp_path):
    part(tmp_path, 0, [0, 10, 20], ended=False)
    part(tmp_path, 1, [0], ended=False)
    assert read_manifest(tmp_path).windows == [0]
    part(tmp_path, 1, [0], ended=True)  # node 1's ranks crashed after step 9
    manifest = read_manifest(tmp_path)
    assert manifest.windows == [0, 10, 20]
    assert [(n.node, n.host, n.ranks) for n in manifest.nodes] == [
        (0, "h0", [0, 1]),
        (1, "h1", [2, 3]),
    ]
    empty = read_node_table(node_file_path(tmp_path, 20, 1, "colls"), "colls")
    assert empty.num_rows == 0
    node_paths(tmp_path, manifest, "steps")


def test_no_part_no_manifest(tmp_path):
    assert merge_manifest(tmp_path) is None
    follower = NodeFollower(tmp_path, 0, 10, 2, 2)
    follower.add_ranks([0, 1])  # ranks that never wrote a step (nor their files)
    assert follower.finish() == [] and follower.poll() == []
    assert not (tmp_path / "node_events" / "nodes.json").exists()
    assert NodePart(entry=NodeEntry(node=0, host="h", ranks=[0]), window_steps=1, world_size=1,
                    windows=[]).ended is False  # fmt: skip


@pytest.mark.parametrize("raw", ["0", "-3", "ten", "2.5"])
def test_a_bad_window_is_one_line(monkeypatch, raw):
    monkeypatch.setenv(WINDOW_ENV, raw)
    with pytest.raises(ValueError, match=rf"^{WINDOW_ENV}=.*expected a whole number") as exc:
        window_steps()
    assert "\n" not in str(exc.value)


def test_the_window_default_and_set(monkeypatch):
    monkeypatch.delenv(WINDOW_ENV, raising=False)
    assert window_steps() == 500
    monkeypatch.setenv(WINDOW_ENV, "7")
    assert window_steps() == 7
    assert np.int64(window_steps()) == 7
