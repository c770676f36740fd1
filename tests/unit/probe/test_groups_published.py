"""probe/bootstrap.py's ``groups_publisher``: before a flush, the rank's meta file rewritten
when the groups it labelled changed (so that the launcher's metrics name a collective's
``dim`` while the run trains), left alone when they did not, and never once the rank's end
is being recorded."""

from __future__ import annotations

from pathlib import Path

from scalescope.events.files import rank_meta_path
from scalescope.events.run import GroupMeta, RankMeta, read_rank_meta, write_json_atomic
from scalescope.probe import bootstrap


class Labelled:
    """What the publisher reads of the probe: its groups as ``Probe.groups`` gives them."""

    def __init__(self) -> None:
        self.groups: dict[str, tuple[list[int], str, str]] = {}


def test_the_groups_are_published_when_they_change(tmp_path: Path) -> None:
    meta = RankMeta(rank=1, hostname="n0")
    write_json_atomic(rank_meta_path(tmp_path, 1), meta)
    probe = Labelled()
    publish = bootstrap.groups_publisher(tmp_path, meta, probe)
    publish()
    assert read_rank_meta(tmp_path, 1).groups == {}
    probe.groups = {"0": ([0, 1, 2, 3], "", "gloo"), "tp01": ([0, 1], "tp", "gloo")}
    publish()
    written = read_rank_meta(tmp_path, 1)
    assert written.groups == {
        "0": GroupMeta(ranks=[0, 1, 2, 3], backend="gloo"),
        "tp01": GroupMeta(ranks=[0, 1], dim="tp", backend="gloo"),
    }
    assert written.status == "running" and written.hostname == "n0"
    inode = rank_meta_path(tmp_path, 1).stat().st_ino
    publish()
    assert rank_meta_path(tmp_path, 1).stat().st_ino == inode, "rewritten without a change"


def test_nothing_is_published_while_the_end_is_recorded(tmp_path: Path) -> None:
    meta = RankMeta(rank=0)
    write_json_atomic(rank_meta_path(tmp_path, 0), meta)
    probe = Labelled()
    probe.groups = {"0": ([0, 1], "", "gloo")}
    with bootstrap._finishing:
        bootstrap.groups_publisher(tmp_path, meta, probe)()
    assert read_rank_meta(tmp_path, 0).groups == {} and meta.groups == {}
