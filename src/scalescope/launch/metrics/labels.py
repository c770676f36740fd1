"""Who each rank is, for the labels of its metrics (launch/metrics/endpoint.py): ``job``, ``rank``,
``Hostname`` and ``gpu`` (named as DCGM's exporter names them, so that the series join its
GPU metrics), and the process groups its collectives ran on (members, mesh dimension: the
``dim`` label), from the rank's meta file (``ranks/rank-N.json``) or, for its host, the
watch's source (the job's store under srun or mpirun).

A series' labels never change once shown (Prometheus would count a second series), so a
rank's series wait for its host, and an op's series for its group, a bounded time.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from scalescope.analyze.ranks.groups import group_role
from scalescope.events.files import rank_meta_path
from scalescope.events.run import GroupMeta
from scalescope.launch.metrics.text import label_text

HOST_WAIT_S = 10.0
"""How long past its first step a rank's series wait for its host (its meta file, written
before the script starts, or the store); shown without ``Hostname`` after. Counted from the
first step, not from the state file, which the rank opens before it imports torch."""
GROUP_WAIT_S = 60.0
"""How long an op's series wait for its group's members and dimension, which the probe writes
to the rank's meta file at a flush (every 20 steps or 5 s); shown without ``dim`` and bus
bandwidth after."""
GROUP_RETRY_S = 1.0
"""While a group is not known, a meta file naming it is read at most this often."""


@dataclass(frozen=True)
class GroupInfo:
    size: int
    """Its members; 0 when not known (no bus factor then)."""
    dim: str
    """The mesh dimension that made it, else its role from the members (``world``,
    ``stride N``, ``other``: analyze/ranks/groups.py); "" when not known."""


class MetaLabels(msgspec.Struct):
    """What the labels take of a rank's meta file (events.run.RankMeta). A group is decoded
    only while its label is not known: at 1,024 ranks each file lists the world's members."""

    local_rank: int = 0
    hostname: str = ""
    groups: dict[str, msgspec.Raw] = msgspec.field(default_factory=dict)


def read_meta_labels(run_dir: Path, rank: int) -> MetaLabels | None:
    try:
        return msgspec.json.decode(rank_meta_path(run_dir, rank).read_bytes(), type=MetaLabels)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None


def visible_gpus(hardware: Mapping[str, Any], environ: Mapping[str, str]) -> tuple[str, ...]:
    """DCGM's ``gpu`` (the device index) of each local rank's device, by local rank: the
    devices ``CUDA_VISIBLE_DEVICES`` lists, else the node's in order; () without GPUs."""
    count = len(hardware.get("gpus") or [])
    if not count:
        return ()
    listed = [d.strip() for d in environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    if listed and all(d.isdigit() for d in listed):
        return tuple(listed[:count])
    return tuple(str(i) for i in range(count))


@dataclass
class _Rank:
    stepping_since: float | None = None
    labels: str = ""
    host: str = ""


class RankLabels:
    """Each rank's label text and host, and the groups its meta file names."""

    def __init__(
        self,
        job: str,
        host: Callable[[int], str] | None = None,
        run_dir: Path | None = None,
        world_size: int = 0,
        gpus: tuple[str, ...] = (),
    ) -> None:
        self.job, self.host_of, self.run_dir = job, host, run_dir
        self.world = set(range(world_size))
        self.gpus = gpus
        """DCGM's ``gpu`` of each local rank (``visible_gpus``); () on a node without."""
        self.job_text = label_text((("job", job),))
        self._ranks: dict[int, _Rank] = {}
        self._groups: dict[str, GroupInfo] = {}
        self._asked: dict[str, tuple[float, float]] = {}
        """A group not known yet: when first asked for, when last looked for."""

    def _read(self, rank: int) -> tuple[str, int]:
        """The rank's host ("" if not known) and local rank (-1 without its meta file); the
        groups its file names are noted."""
        meta = read_meta_labels(self.run_dir, rank) if self.run_dir is not None else None
        host, local = "", -1
        if meta is not None:
            host, local = meta.hostname, meta.local_rank
            for label, raw in meta.groups.items():
                if label not in self._groups:
                    self._note(label, raw)
        if not host and self.host_of is not None:
            with suppress(Exception):  # the store went away: asked again at the next scrape
                host = self.host_of(rank) or ""
        return host, local

    def _note(self, label: str, raw: msgspec.Raw) -> None:
        with suppress(msgspec.DecodeError, msgspec.ValidationError):
            group = msgspec.json.decode(raw, type=GroupMeta)
            if group.ranks:
                dim = group.dim or group_role(set(group.ranks), self.world or set(group.ranks))
                self._groups[label] = GroupInfo(len(group.ranks), dim)

    def rank(self, rank: int, stepping: bool = True) -> tuple[str, str] | None:
        """The rank's label text and host; None while its series wait for its host
        (``stepping``: the rank finished a step)."""
        known = self._ranks.setdefault(rank, _Rank())
        if known.labels:
            return known.labels, known.host
        host, local = self._read(rank)
        if not host:
            if not stepping:
                return None
            if known.stepping_since is None:
                known.stepping_since = time.monotonic()
            if time.monotonic() - known.stepping_since < HOST_WAIT_S:
                return None
        gpu = self.gpus[local] if 0 <= local < len(self.gpus) else ""
        pairs = (("job", self.job), ("rank", str(rank)), ("Hostname", host), ("gpu", gpu))
        known.host, known.labels = host, label_text(pairs)
        return known.labels, known.host

    def group(self, rank: int, label: str) -> GroupInfo | None:
        """The group's size and dimension; None while its series wait for them."""
        known = self._groups.get(label)
        if known is not None:
            return known
        now = time.monotonic()
        first, last = self._asked.get(label, (now, -math.inf))
        if now - last >= GROUP_RETRY_S:
            self._asked[label] = (first, now)
            self._read(rank)
            known = self._groups.get(label)
        if known is None and now - first >= GROUP_WAIT_S:
            known = self._groups[label] = GroupInfo(0, "")
        return known
