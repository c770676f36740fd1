"""A node's record in the job's store (launch/channel/node_record.py): what a relay reduces of
its ranks' states, its bytes there and back, which of two records claiming a rank is
believed, and, on a real TCPStore, a record sealed for another job or key, garbage under a
good seal, a replay and an older relay's absence, each read as the seals' rules say."""

from __future__ import annotations

from datetime import timedelta

import pytest
from intruder import OTHER_KEY, Intruder
from torch.distributed import TCPStore

from scalescope.events.live_state import TOTAL_PHASES, LiveState, LiveTotals
from scalescope.launch.channel.node_record import (
    VERSION,
    NodeTotals,
    Oldest,
    current,
    decode,
    encode,
    node_record,
)
from scalescope.launch.channel.store import Channel

KEY, JOB = b"k" * 32, b"j" * 32
NOW = 1_700_000_000.0


def totals(rank: int) -> LiveTotals:
    phases = {p: (rank + 1) * 1000 * (i + 1) for i, p in enumerate(TOTAL_PHASES)}
    return LiveTotals(10**9 * (rank + 1), 32 * (rank + 1), 10**8 * (rank + 1), phases)


def state(rank: int, steps: int, inside_since: float | None = None, **kw) -> LiveState:
    """Rank ``rank`` ``steps`` steps in; in an all_reduce since ``inside_since`` when given,
    else out of one that took 2 ms."""
    values = dict(
        rank=rank, pid=100 + rank, steps_done=steps, last_step_end_s=NOW - rank,
        phase="backward", phase_since_s=NOW - 1.0, op="all_reduce", group="0", seq=40 + rank,
        nbytes=4096 * (rank + 1), entered_s=inside_since or NOW - 0.5,
        left_s=None if inside_since else NOW - 0.498, last_done_s=NOW - 10.0 - rank,
        stage="running", stage_since_s=NOW - 60.0, totals=totals(rank),
    )  # fmt: skip
    return LiveState(**(values | kw))


def four_ranks() -> dict[int, LiveState]:
    """Ranks 4-7 of a node: 5 the slowest, 6 and 7 in a collective (7 first), 4 starting."""
    return {
        4: state(4, 0, stage="model", last_step_end_s=None, totals=None),
        5: state(5, 9),
        6: state(6, 12, inside_since=NOW - 3.0),
        7: state(7, 12, inside_since=NOW - 4.0, op="all_gather", group="tp", seq=70),
    }


def test_the_record_reduces_the_nodes_ranks() -> None:
    states = four_ranks()
    ops = {r: {(s.op, s.group): s.completed} for r, s in states.items() if s.completed}
    record = node_record("nodeb", NOW, states, ops)
    assert record is not None
    assert (record.v, record.host, record.at_s, record.ranks) == (VERSION, "nodeb", NOW,
                                                                  (4, 5, 6, 7))  # fmt: skip
    assert (record.steps_min, record.slowest, record.steps_max) == (0, 4, 12)
    assert record.last_step_end_s == NOW - 5
    assert record.last_progress_s == NOW - 5  # rank 5's step end; its collective ended earlier
    assert record.in_collective == 2
    assert record.oldest == Oldest(7, "all_gather", "tp", 70, NOW - 4.0)
    assert record.starting == 1
    phase_ns = tuple(sum((r + 1) * 1000 * (i + 1) for r in (5, 6, 7))
                     for i in range(len(TOTAL_PHASES)))  # fmt: skip
    assert record.totals == NodeTotals(3, 9 + 12 + 12, 10**9 * 21, 32 * 21, 10**8 * 21, phase_ns)
    [op] = record.ops  # ranks 4 and 5 left an all_reduce of 20,480 and 24,576 bytes
    assert (op.op, op.group, op.rank, op.count, op.nbytes) == ("all_reduce", "0", 4, 2, 45056.0)
    assert op.bw == pytest.approx(20480 / 0.002 + 24576 / 0.002, rel=1e-3)  # float s near 2023
    assert node_record("nodeb", NOW, {}, {}) is None


def test_a_record_reads_back_as_written_and_anything_else_as_none() -> None:
    record = node_record("nodeb", NOW, four_ranks(), {})
    assert record is not None
    raw = encode(record)
    assert decode(raw) == record
    assert len(raw) < 600, "a 1,024-node frame reads ~0.5 MB"
    for bad in (b"", b"\0" * 64, raw[:-3], b'{"v": 1}', b"[1, 2]",
                raw.replace(b'"v":1', b'"v":2')):  # fmt: skip
        assert decode(bad) is None, bad


def record(host: str, at_s: float, ranks: tuple[int, ...]):
    made = node_record(host, at_s, {r: state(r, 5) for r in ranks}, {})
    assert made is not None
    return made


def test_of_two_records_claiming_a_rank_the_fresher_is_believed() -> None:
    dead = record("nodea", NOW - 30, (0, 1))
    taken_over = record("nodea", NOW, (0, 1))
    other = record("nodeb", NOW - 60, (2, 3))
    assert current({0: dead, 1: other, 2: taken_over}) == {1: other, 2: taken_over}
    assert current({0: dead, 1: other}) == {0: dead, 1: other}


@pytest.fixture
def server():
    return TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                    timeout=timedelta(seconds=10))  # fmt: skip


def registered(server, relays: int) -> Channel:
    owner = Channel(server, key=KEY, job=JOB)
    owner.put_job()
    for i in range(relays):
        owner.register(b"session-%d" % i)
    return owner


def test_records_that_do_not_open_are_unknown_and_a_sealed_non_record_is_passed_over(
    server,
) -> None:
    owner = registered(server, 4)
    owner.publish_node(0, record("nodea", NOW, (0, 1)))
    Intruder(server).publish_node(1, record("nodeb", NOW, (2, 3)))  # another key
    Channel(server, key=KEY, job=b"another-job").publish_node(2, record("nodec", NOW, (4,)))
    server.set("scalescope/node/3", owner.seal(b"node:3:", b"not a record"))
    reader = Channel(TCPStore("127.0.0.1", server.port, is_master=False), key=KEY, warn=None)
    records = reader.node_records()
    assert sorted(records) == [0] and records[0].ranks == (0, 1)
    assert reader.unknown_nodes == {1, 2}
    said = sorted(r.split(":")[0] for r in reader.refused)
    assert said == ["relay 1's node record", "relay 2's node record"]


def test_an_older_record_of_a_relay_is_a_replay_and_an_older_relay_publishes_none(
    server,
) -> None:
    owner = registered(server, 2)
    reader = Channel(TCPStore("127.0.0.1", server.port, is_master=False), key=KEY, warn=None)
    assert reader.node_records() == {} and reader.unknown_nodes == set()
    old = encode(record("nodea", NOW - 1, (0, 1)))
    owner.publish_node(0, record("nodea", NOW, (0, 1)))
    assert reader.node_records()[0].at_s == NOW
    server.set("scalescope/node/0", owner.seal(b"node:0:", old))
    assert reader.node_records() == {} and reader.unknown_nodes == {0}
    server.set("scalescope/node/0", owner.seal(b"node:1:", encode(record("nodea", NOW + 1,
                                                                        (0, 1)))))  # fmt: skip
    assert reader.node_records() == {} and reader.unknown_nodes == {0}, "relay 1's seal"


def test_a_record_is_sealed_with_its_relays_index_for_the_job(server) -> None:
    owner = registered(server, 1)
    made = record("nodea", NOW, (0,))
    owner.publish_node(0, made)
    value = bytes(server.get("scalescope/node/0"))
    assert Channel(server, key=KEY, job=JOB).unseal(b"node:0:", value) == encode(made)
    assert Channel(server, key=OTHER_KEY, job=JOB).unseal(b"node:0:", value) is None
