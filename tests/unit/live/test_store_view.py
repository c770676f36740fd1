"""`top --connect`'s view of states read from the store: the rows worth showing first, the
stages of starting ranks, and the verdict once nothing progressed for 10 s."""

from __future__ import annotations

import re
import time

import msgspec
from rich.console import Console
from store_jobs import Reading, published_job
from torch.distributed import TCPStore

from scalescope.events.live_state import LiveState
from scalescope.live.store_view import parse_address, stall_words
from scalescope.report.media.terminal import document_renderable
from scalescope.report.renderers import document
from scalescope.report.subjects import StoreFrame, StoreRank
from scalescope.report.views.live_store import MAX_ROWS

NOW = 1_000.0
KEY, JOB = b"k" * 32, b"j" * 32


def state(rank: int, steps: int = 7, seq: int = 41, inside: bool = True, **kw) -> LiveState:
    values = dict(
        rank=rank, pid=100 + rank, steps_done=steps, last_step_end_s=NOW - 20.0,
        phase="backward", phase_since_s=NOW - 19.0, op="all_reduce", group="0", seq=seq,
        nbytes=9488, entered_s=NOW - 18.0, left_s=None if inside else NOW - 18.5,
        last_done_s=NOW - 20.0, stage="running", stage_since_s=NOW - 60.0,
    )  # fmt: skip
    return LiveState(**(values | kw))


def text(ranks: list[StoreRank], world: int) -> str:
    console = Console(width=200, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    frame = StoreFrame(ranks=ranks, world=world, now=NOW, stall=stall_words(ranks, NOW))
    console.print(document_renderable(document(frame)))
    return console.export_text()


def test_a_thousand_ranks_show_the_stuck_one_first_and_the_verdict():
    ranks = [StoreRank(state(r), f"node{r // 64}", 2.0, "") for r in range(1024)]
    ranks[77] = StoreRank(state(77, seq=40, inside=False, phase="outside"), "node1", 0.0, "")
    out = text(ranks, 1024)
    assert "1024 of 1024 ranks reporting on 16 node(s)" in out
    assert f"{MAX_ROWS} of 1024 ranks shown" in out
    rows = [line for line in out.splitlines() if "│ node" in line]
    assert len(rows) == MAX_ROWS
    assert "no progress for 20 s: rank 77 on node1 has not entered all_reduce #41" in out


def test_starting_ranks_show_their_stage_and_no_verdict():
    early = dict(steps=0, op="", seq=-1, entered_s=None, last_step_end_s=None, last_done_s=None)
    ranks = [StoreRank(state(0, stage="init_process_group", stage_since_s=NOW - 12.0, **early),
                       "node0", None, ""),
             StoreRank(state(1, stage="import", stage_since_s=NOW - 30.0, **early), "node0",
                       None, "")]  # fmt: skip
    out = text(ranks, 2)
    assert "starting (init_process_group, 12 s)" in out and "starting (import, 30 s)" in out
    assert "2 rank(s) still starting" in out and "no progress" not in out


def test_the_address_is_host_and_port():
    assert parse_address("10.0.0.1:29500") == ("10.0.0.1", 29500)
    for bad in ("10.0.0.1", ":29500", "host:port", "host:0"):
        try:
            parse_address(bad)
        except ValueError as exc:
            assert "--connect takes HOST:PORT" in str(exc)
        else:
            raise AssertionError(bad)


def test_the_watchs_alert_reaches_top_connect_through_the_store():
    from torch.distributed import TCPStore

    from scalescope.launch.channel.store import Channel
    from scalescope.live.store_view import StoreTop

    server = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    channel = Channel(server, key=KEY, job=JOB)
    channel.put_world(1)
    top = StoreTop(Channel(TCPStore("127.0.0.1", server.port, is_master=False), key=KEY))
    console = Console(width=200, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(top.frame())
    assert "slowdown" not in console.export_text()
    channel.put_alert("slowdown: rank 3 on node c3: forward +38 % since step 5,012; ...")
    console.print(top.frame())
    assert "slowdown: rank 3 on node c3: forward +38 % since step 5,012" in console.export_text()


def test_top_connect_needs_the_key_and_shows_no_state_it_cannot_check(tmp_path, monkeypatch):
    from torch.distributed import TCPStore

    from scalescope.launch.channel.seals import load_key
    from scalescope.launch.channel.store import Channel
    from scalescope.live.store_view import StoreTop, store_top

    server = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    monkeypatch.setenv("SCALESCOPE_KEY_FILE", str(tmp_path / "key"))
    try:
        store_top(f"127.0.0.1:{server.port}")
    except ValueError as exc:
        assert str(exc).startswith(f"no key file at {tmp_path / 'key'}: ")
        assert "\n" not in str(exc)
    else:
        raise AssertionError("top --connect ran without a key")
    assert not (tmp_path / "key").exists(), "a new key would check nothing"
    key = load_key()
    owner = Channel(server, key=key, job=JOB)
    owner.put_job()
    owner.put_world(2)
    owner.put_host(1, "node7")
    client = TCPStore("127.0.0.1", server.port, is_master=False)
    top = StoreTop(Channel(client, key=key, warn=None))
    Channel(server, key=b"o" * 32, job=JOB).publish(1, b"\0" * 256)
    console = Console(width=200, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(top.frame())
    out = console.export_text()
    assert "0 of 2 ranks reporting" in out
    assert "1 rank(s) unknown: their state in the store did not open with this job's seal" in out
    rows = [[c.strip() for c in row.split("│")[:3]] for row in out.splitlines() if "│" in row]
    assert rows == [["1", "node7", "unknown"]], out


def frame_text(top) -> str:
    console = Console(width=200, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(top.frame())
    return console.export_text()


def viewer(owner) -> tuple:
    from scalescope.live.store_view import StoreTop

    port = owner.store.port
    reading = Reading(TCPStore("127.0.0.1", port, is_master=False), key=KEY, warn=None)
    return StoreTop(reading), reading


def test_from_the_nodes_records_a_frame_reads_only_the_ranks_worth_a_row(tmp_path):
    """512 ranks on 32 nodes, rank 37 behind in its collective: the head from the records,
    the rows from the ranks the records name (at most 2 x 16), rank 37 first."""
    owner, _ = published_job(tmp_path, 512, 16, stuck=37, since_s=3.0)
    top, reading = viewer(owner)
    out = frame_text(top)
    assert "512 of 512 ranks reporting on 32 node(s); steps done 7 (slowest) to 7" in out
    assert f"{MAX_ROWS} of 512 ranks shown" in out
    rows = [[c.strip() for c in line.split("│")] for line in out.splitlines() if "│ node" in line]
    assert rows[0][:3] == ["37", "node2", "running"] and "all_reduce #40" in rows[0][6]
    assert len(rows) == MAX_ROWS
    assert reading.asked[0] == 0, "no rank without a record"
    assert MAX_ROWS <= reading.asked[1] <= 2 * MAX_ROWS, "only the ranks the records name"
    out = frame_text(top)
    assert "0.00 steps/s (slowest node)" in out and "record(s) unknown" not in out


def test_a_few_nodes_records_show_the_rows_of_every_rank(tmp_path):
    """64 ranks: every rank's state read for the rows, as without records."""
    owner, _ = published_job(tmp_path, 64, 16, stuck=37, since_s=3.0)
    top, reading = viewer(owner)
    out = frame_text(top)
    rows = [line for line in out.splitlines() if "│ node" in line]
    assert len(rows) == MAX_ROWS and "37 " in rows[0]
    assert reading.asked == [0, 64]


def test_a_node_record_that_does_not_open_is_unknown_and_its_ranks_are_read(tmp_path):
    from intruder import Intruder

    from scalescope.launch.channel.node_record import node_record

    owner, _ = published_job(tmp_path, 32, 16, stuck=20, since_s=3.0)
    forged = node_record("node1", time.time() + 60, {16: state(16, steps=10**6)}, {})
    Intruder(owner.store).publish_node(1, forged)
    top, reading = viewer(owner)
    out = frame_text(top)
    assert "32 of 32 ranks reporting on 2 node(s)" in out
    assert "steps done 7 (slowest) to 7" in out, "the forged record's steps are not believed"
    assert "1 node record(s) unknown (relay 1): they did not open with this job's seal" in out
    assert reading.asked[0] == 16, "node1's 16 ranks read one by one"


def test_at_a_stall_every_rank_is_read_once_for_the_verdict(tmp_path):
    """272 ranks on 17 nodes, none progressed for 25 s: the verdict from every rank's state,
    read again only once a record changes."""
    owner, _ = published_job(tmp_path, 272, 16, stuck=20, since_s=25.0, stall=True)
    top, reading = viewer(owner)
    out = frame_text(top)
    assert "rank 20 on node1 has not entered all_reduce #41" in out, out
    assert re.search(r"no progress for 2\d s: rank 20", out), "25 s, and the time it took here"
    assert reading.asked[-1] == 272
    reading.asked.clear()
    out = frame_text(top)
    assert "rank 20 on node1 has not entered all_reduce #41" in out
    assert 272 not in reading.asked, "the records did not change: the verdict stands"
    again = owner.node_records()[1]
    owner.publish_node(1, msgspec.structs.replace(again, at_s=again.at_s + 1))
    frame_text(top)
    assert reading.asked[-1] == 272, "a record changed: every rank read again"
