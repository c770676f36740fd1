"""launch/metrics/endpoint.py per op and its labels, over state files written with the probe's own
writer and meta files as the ranks write them: the last completed collective of each op and
group (size, bytes/s, bus bandwidth with nccl-tests' factor written out here), its mesh
dimension or role as ``dim``, DCGM's ``Hostname`` and ``gpu``, the per-node means, and the
waits that keep a series' labels from ever changing. Parsed with prometheus_client's parser."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from prometheus_client.parser import text_string_to_metric_families

from scalescope.events.files import live_state_path, rank_meta_path
from scalescope.events.live_state import read_live_states
from scalescope.events.live_state_writer import LiveStateWriter
from scalescope.events.run import GroupMeta, RankMeta, write_json_atomic
from scalescope.launch.metrics import labels as metrics_labels
from scalescope.launch.metrics.endpoint import MetricsEndpoint
from scalescope.launch.metrics.labels import visible_gpus

MS = 1_000_000
WALL_NS = 1_700_000_000 * 10**9
"""The writers' wall-minus-perf offset: perf times read as wall times near 2023, where a float
of seconds keeps a collective's duration to about 0.5 µs (hence rel=1e-3 on milliseconds)."""
GROUPS = {
    "0": GroupMeta(ranks=[0, 1, 2, 3]),
    "tp01": GroupMeta(ranks=[0, 1], dim="tp"),
    "tp23": GroupMeta(ranks=[2, 3], dim="tp"),
    "7": GroupMeta(ranks=[0, 2]),
}
BYTES_PER_S = "scalescope_collective_bytes_per_second"
BUS = "scalescope_collective_bus_bytes_per_second"


def near(expected: float):
    return pytest.approx(expected, rel=1e-3)


def writer(run_dir: Path, rank: int) -> LiveStateWriter:
    w = LiveStateWriter(live_state_path(run_dir, rank), 1000 + rank, WALL_NS)
    w.add_step(100 * MS, 8)
    w.step(1, 100 * MS)
    return w


def collective(w: LiveStateWriter, op: str, group: str, nbytes: int, start: int, ms: float):
    w.enter(op, group, start, nbytes, start)
    w.leave(group, start, start + int(ms * MS))


def meta(run_dir: Path, rank: int, groups: dict | None = None, host: str = "") -> None:
    host = host or f"node{rank // 2}"
    doc = RankMeta(rank=rank, local_rank=rank % 2, world_size=4, hostname=host,
                   groups=GROUPS if groups is None else groups)  # fmt: skip
    write_json_atomic(rank_meta_path(run_dir, rank), doc)


def endpoint(run_dir: Path, per: str = "rank", gpus: tuple[str, ...] = ("4", "5")):
    return MetricsEndpoint("job-7", per=per, run_dir=run_dir, world_size=4, gpus=gpus)


def scrape(e: MetricsEndpoint, run_dir: Path) -> dict[tuple[str, tuple], float]:
    e.latest.observe(read_live_states(run_dir, 4))
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(e.collector.text().decode())
        for s in family.samples
    }


def value(samples: dict, name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    assert key in samples, f"{key} not in {sorted(k for k in samples if k[0] == name)}"
    return samples[key]


def rank_labels(rank: int) -> dict[str, str]:
    return {"job": "job-7", "rank": str(rank), "Hostname": f"node{rank // 2}",
            "gpu": ("4", "5")[rank % 2]}  # fmt: skip


@pytest.fixture
def run(tmp_path: Path) -> tuple[Path, list[LiveStateWriter]]:
    """4 ranks, 2 a node: rank r's last collective an all_reduce of (r + 1) MB on its tp
    pair, taking 2 + r ms."""
    writers = []
    for rank in range(4):
        w = writer(tmp_path, rank)
        tp = "tp01" if rank < 2 else "tp23"
        collective(w, "all_reduce", tp, (rank + 1) * 10**6, 200 * MS, 2 + rank)
        meta(tmp_path, rank)
        writers.append(w)
    return tmp_path, writers


def test_the_last_collective_of_each_op_with_its_bandwidths_and_dimension(run) -> None:
    run_dir, writers = run
    e = endpoint(run_dir)
    scrape(e, run_dir)
    collective(writers[0], "all_gather", "0", 3 * 10**6, 300 * MS, 4)  # a later read
    got = scrape(e, run_dir)
    for rank in range(4):
        tp = {**rank_labels(rank), "op": "all_reduce", "dim": "tp"}
        tp["group"] = "tp01" if rank < 2 else "tp23"
        algbw = (rank + 1) * 10**6 / ((2 + rank) / 1e3)
        assert value(got, "scalescope_collective_bytes", **tp) == (rank + 1) * 10**6
        assert value(got, BYTES_PER_S, **tp) == near(algbw)
        assert value(got, BUS, **tp) == near(algbw * 2 * (2 - 1) / 2)  # all_reduce: 2(n-1)/n
    world = {**rank_labels(0), "op": "all_gather", "group": "0", "dim": "world"}
    assert value(got, BYTES_PER_S, **world) == near(3e6 / 4e-3)
    assert value(got, BUS, **world) == near(3e6 / 4e-3 * 3 / 4)  # all_gather: (n-1)/n
    assert value(got, BYTES_PER_S, **{**world, "op": "all_reduce", "group": "tp01",
                                      "dim": "tp"}) == near(1e6 / 2e-3)  # fmt: skip


def test_a_group_without_a_mesh_name_gets_its_role(tmp_path: Path) -> None:
    w = writer(tmp_path, 2)
    collective(w, "broadcast", "7", 5000, 10 * MS, 1)
    meta(tmp_path, 2)
    got = scrape(endpoint(tmp_path), tmp_path)
    labels = {**rank_labels(2), "op": "broadcast", "group": "7", "dim": "stride 2"}
    assert value(got, BUS, **labels) == near(5000 / 1e-3)  # broadcast: factor 1


def test_a_collective_still_running_or_a_barrier_gives_no_bandwidth(tmp_path: Path) -> None:
    w = writer(tmp_path, 0)
    w.enter("all_reduce", "0", 1, 1000, 10 * MS)
    meta(tmp_path, 0)
    got = scrape(endpoint(tmp_path), tmp_path)
    assert not [k for k in got if k[0].startswith("scalescope_collective_bytes")]
    collective(w, "barrier", "0", 8, 20 * MS, 1)
    got = scrape(endpoint(tmp_path), tmp_path)
    assert value(got, BYTES_PER_S, **rank_labels(0), op="barrier", group="0", dim="world")
    assert not [k for k in got if k[0] == BUS]


def test_per_node_the_mean_of_its_ranks_by_op_and_dimension(run) -> None:
    run_dir, _ = run
    got = scrape(endpoint(run_dir, per="node"), run_dir)
    node1 = {"job": "job-7", "Hostname": "node1", "op": "all_reduce", "dim": "tp"}
    assert value(got, BYTES_PER_S, **node1) == near((3e6 / 4e-3 + 4e6 / 5e-3) / 2)
    assert value(got, "scalescope_collective_bytes", **node1) == 3.5e6
    assert value(got, "scalescope_steps_total", job="job-7", Hostname="node1") == 2
    assert not [k for k in got if dict(k[1]).keys() & {"rank", "gpu", "group"}]


@pytest.mark.parametrize(
    ("visible", "gpus", "expected"),
    [("", 2, ("0", "1")), ("2,3", 2, ("2", "3")), ("3,1,0", 2, ("3", "1")),
     ("GPU-9f3c,GPU-1a2b", 2, ("0", "1")), ("1", 0, ())],
)  # fmt: skip
def test_dcgms_gpu_is_the_local_ranks_visible_device(visible, gpus, expected) -> None:
    hardware = {"gpus": [{"index": i} for i in range(gpus)]}
    assert visible_gpus(hardware, {"CUDA_VISIBLE_DEVICES": visible}) == expected


def test_a_rank_waits_for_its_host_then_shows_without_it(tmp_path, monkeypatch) -> None:
    """The wait is counted from the rank's first step: it opens its state file before it
    imports torch and writes its meta file, which may take long on a loaded node."""
    w = LiveStateWriter(live_state_path(tmp_path, 0), 1000, WALL_NS)
    e = endpoint(tmp_path)
    monkeypatch.setattr(metrics_labels, "HOST_WAIT_S", 0.0)
    assert not [k for k in scrape(e, tmp_path) if k[0] == "scalescope_steps_total"]
    monkeypatch.setattr(metrics_labels, "HOST_WAIT_S", 10.0)
    w.add_step(100 * MS, 8)
    w.step(1, 100 * MS)
    assert not [k for k in scrape(e, tmp_path) if k[0] == "scalescope_steps_total"]
    monkeypatch.setattr(metrics_labels, "HOST_WAIT_S", 0.0)
    assert value(scrape(e, tmp_path), "scalescope_steps_total", job="job-7", rank="0") == 1
    meta(tmp_path, 0, host="late")  # labels once shown never change
    assert value(scrape(e, tmp_path), "scalescope_steps_total", job="job-7", rank="0") == 1


def test_a_rank_with_its_meta_file_shows_before_its_first_step(tmp_path) -> None:
    LiveStateWriter(live_state_path(tmp_path, 1), 1001, WALL_NS)
    meta(tmp_path, 1)
    assert value(scrape(endpoint(tmp_path), tmp_path), "scalescope_steps_total",
                 **rank_labels(1)) == 0  # fmt: skip


def test_the_host_comes_from_the_watchs_source_without_a_meta_file(tmp_path) -> None:
    writer(tmp_path, 3)
    e = MetricsEndpoint("j", lambda r: f"h{r}", run_dir=tmp_path, world_size=4)
    got = scrape(e, tmp_path)
    assert value(got, "scalescope_steps_total", job="j", rank="3", Hostname="h3") == 1


def test_an_ops_series_waits_for_its_group_published_later(tmp_path, monkeypatch) -> None:
    """The probe rewrites a rank's meta file with its groups at a flush; before that the op's
    series waits, and after ``GROUP_WAIT_S`` shows without ``dim`` or bus bandwidth."""
    monkeypatch.setattr(metrics_labels, "GROUP_RETRY_S", 0.0)
    w = writer(tmp_path, 1)
    collective(w, "all_reduce", "tp01", 10**6, 10 * MS, 2)
    meta(tmp_path, 1, groups={})
    e = endpoint(tmp_path)
    assert not [k for k in scrape(e, tmp_path) if k[0] == BYTES_PER_S]
    meta(tmp_path, 1)
    labels = {**rank_labels(1), "op": "all_reduce", "group": "tp01", "dim": "tp"}
    assert value(scrape(e, tmp_path), BUS, **labels) == near(1e6 / 2e-3)
    collective(w, "all_reduce", "9", 10**6, 20 * MS, 2)  # a group no file names
    monkeypatch.setattr(metrics_labels, "GROUP_WAIT_S", 0.0)
    got = scrape(e, tmp_path)
    assert value(got, BYTES_PER_S, **rank_labels(1), op="all_reduce", group="9") == near(5e8)
    assert not [k for k in got if k[0] == BUS and ("group", "9") in k[1]]


def node_records(run_dir: Path, hosts: tuple[str, ...] = ("node0", "node1")) -> list:
    """The records the nodes' relays would publish of these state files (2 ranks a node)."""
    from scalescope.launch.channel.node_record import node_record

    states = read_live_states(run_dir, 4)
    ops = {r: {(s.op, s.group): s.completed} for r, s in states.items() if s.completed}
    made = []
    for node, host in enumerate(("node0", "node1")):
        if host in hosts:
            mine = {r: s for r, s in states.items() if r // 2 == node}
            made.append(node_record(host, 1.0, mine, ops))
    return made


def scrape_nodes(e: MetricsEndpoint, run_dir: Path, nodes) -> dict[tuple[str, tuple], float]:
    e.latest.observe(read_live_states(run_dir, 4), nodes)
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(e.collector.text().decode())
        for s in family.samples
    }


def same_series(got: dict, want: dict) -> None:
    """The same series with the same values (sums in another order: to float rounding)."""
    unknown = ("scalescope_node_records_unknown", (("job", "job-7"),))
    assert sorted(set(got) - {unknown}) == sorted(want)
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=1e-9), key


@pytest.mark.parametrize("hosts", [("node0", "node1"), ("node0",)])
def test_per_node_from_the_nodes_records_the_same_series_as_from_their_ranks(run, hosts):
    """Every node from its record, or node1 (no record: an older relay) from its ranks."""
    from scalescope.launch.channel.node_record import NodesRead

    run_dir, writers = run
    collective(writers[1], "all_gather", "0", 3 * 10**6, 300 * MS, 4)
    collective(writers[3], "barrier", "0", 8, 300 * MS, 1)
    want = scrape(endpoint(run_dir, per="node"), run_dir)
    records = NodesRead(tuple(node_records(run_dir, hosts)))
    got = scrape_nodes(endpoint(run_dir, per="node"), run_dir, records)
    same_series(got, want)
    assert got[("scalescope_node_records_unknown", (("job", "job-7"),))] == 0
    assert value(got, "scalescope_step", job="job-7", Hostname="node1") == 1
    ahead = msgspec.structs.replace(records.records[0], steps_min=99)
    got = scrape_nodes(endpoint(run_dir, per="node"), run_dir, NodesRead((ahead,)))
    assert value(got, "scalescope_step", job="job-7", Hostname="node0") == 99, "the record's"


def test_a_node_record_that_does_not_open_is_counted_and_its_ranks_read(run) -> None:
    """Through the job's store: node1's record sealed with another key is unknown, counted in
    ``scalescope_node_records_unknown``, and node1's series come from its ranks' states."""
    from datetime import timedelta

    from intruder import Intruder
    from torch.distributed import TCPStore

    from scalescope.launch.channel.store import Channel
    from scalescope.launch.watch.sources import StoreSource

    run_dir, _ = run
    server = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                      timeout=timedelta(seconds=10))  # fmt: skip
    owner = Channel(server, key=b"k" * 32, job=b"j" * 32)
    owner.put_job()
    [owner.register(b"s%d" % i) for i in range(2)]
    node0, node1 = node_records(run_dir)
    owner.publish_node(0, node0)
    Intruder(server).publish_node(1, node1)
    read = StoreSource(Channel(server, key=b"k" * 32, warn=None), 4).nodes()
    assert (read.records, read.unknown) == ((node0,), (1,))
    want = scrape(endpoint(run_dir, per="node"), run_dir)
    got = scrape_nodes(endpoint(run_dir, per="node"), run_dir, read)
    assert got.pop(("scalescope_node_records_unknown", (("job", "job-7"),))) == 1
    same_series(got, want)
