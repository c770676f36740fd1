"""Shared by the ingesters: a compact row builder, op and dtype names, the Run they return."""

from __future__ import annotations

import math
import re
from array import array
from pathlib import Path

import numpy as np

from scalescope.events import EventTable, Kind, RankMeta, Run, RunMeta, SymbolTable

OPS = {
    "allreduce": "all_reduce",
    "broadcast": "broadcast",
    "bcast": "broadcast",
    "allgather": "all_gather",
    "reducescatter": "reduce_scatter",
    "alltoall": "all_to_all",
    "alltoallv": "all_to_all",
    "barrier": "barrier",
    "send": "send",
    "recv": "recv",
    "recvanysource": "recv",
    "reduce": "reduce",
    "gather": "gather",
    "scatter": "scatter",
}
"""Collective names with underscores removed -> scalescope's op names (docs/schema.md)."""
_DECORATIONS = re.compile(r"(base|coalesced|intotensor|tensor|single|inplace)$")

DTYPES: dict[str, tuple[str, int]] = {
    # record_param_comms "dtype" (c10 ScalarType names)
    "float": ("float32", 4),
    "double": ("float64", 8),
    "half": ("float16", 2),
    "bfloat16": ("bfloat16", 2),
    "long": ("int64", 8),
    "int": ("int32", 4),
    "short": ("int16", 2),
    "char": ("int8", 1),
    "byte": ("uint8", 1),
    "bool": ("bool", 1),
    "complexfloat": ("complex64", 8),
    "complexdouble": ("complex128", 16),
    "float8_e4m3fn": ("float8_e4m3fn", 1),
    "float8_e5m2": ("float8_e5m2", 1),
    # "Input type" of record_shapes (C++ type names)
    "long int": ("int64", 8),
    "unsigned char": ("uint8", 1),
    "signed char": ("int8", 1),
    "short int": ("int16", 2),
    "c10::half": ("float16", 2),
    "c10::bfloat16": ("bfloat16", 2),
    "c10::complex<float>": ("complex64", 8),
    "c10::complex<double>": ("complex128", 16),
    # Horovod and numpy names
    "float16": ("float16", 2),
    "float32": ("float32", 4),
    "float64": ("float64", 8),
    "int8": ("int8", 1),
    "int16": ("int16", 2),
    "int32": ("int32", 4),
    "int64": ("int64", 8),
    "uint8": ("uint8", 1),
    "uint16": ("uint16", 2),
}
"""Element type names as traces write them -> (torch dtype name, bytes per element)."""


def normalize_op(raw: str) -> str:
    """``allreduce``, ``_allgather_base``, ``all_to_all_single``, ``ALLREDUCE`` -> ours."""
    key = raw.lower().replace("_", "").replace(" ", "")
    for _ in range(3):
        if key in OPS:
            return OPS[key]
        key = _DECORATIONS.sub("", key)
    return OPS.get(key, raw.lower().strip("_"))


def dtype_info(raw: str | None) -> tuple[str, int]:
    """(torch name, element size); ('', 0) when the type is unknown."""
    if not raw:
        return "", 0
    return DTYPES.get(raw.strip().lower(), (raw.strip().lower(), 0))


def numel(dims: list[int]) -> int:
    return math.prod(int(d) for d in dims) if dims else 1


class RowBuilder:
    """Rows of one rank in compact typed arrays, turned into an EventTable at the end."""

    def __init__(self, rank: int, symbols: SymbolTable) -> None:
        self.rank = rank
        self.symbols = symbols
        self._ints = {c: array("q") for c in ("step", "kind", "start_ns", "dur_ns")}
        self._ints |= {c: array("q") for c in ("nbytes", "count", "seq", "peer")}
        self._strs = {c: array("i") for c in ("name", "dtype", "group", "tag")}

    def add(
        self,
        step: int,
        kind: Kind,
        name: str,
        start_ns: int,
        dur_ns: int,
        *,
        nbytes: int = 0,
        count: int = 0,
        dtype: str = "",
        group: str = "",
        seq: int = -1,
        tag: str = "",
        peer: int = -1,
    ) -> None:
        ints, strs, intern = self._ints, self._strs, self.symbols.intern
        for col, value in (
            ("step", step),
            ("kind", int(kind)),
            ("start_ns", start_ns),
            ("dur_ns", dur_ns),
            ("nbytes", nbytes),
            ("count", count),
            ("seq", seq),
            ("peer", peer),
        ):
            ints[col].append(int(value))
        for col, text in (("name", name), ("dtype", dtype), ("group", group), ("tag", tag)):
            strs[col].append(intern(text))

    def __len__(self) -> int:
        return len(self._ints["step"])

    def table(self) -> EventTable:
        ints = {c: _column(a, np.int64) for c, a in self._ints.items()}
        strs = {c: _column(a, np.int32) for c, a in self._strs.items()}
        return EventTable(
            rank=np.full(len(self), self.rank, dtype=np.int32),
            step=ints["step"].astype(np.int32),
            kind=ints["kind"].astype(np.int8),
            start_ns=ints["start_ns"],
            dur_ns=ints["dur_ns"],
            nbytes=ints["nbytes"],
            count=ints["count"],
            seq=ints["seq"],
            peer=ints["peer"].astype(np.int32),
            **strs,
            symbols=self.symbols,
        )


def _column(values: array, dtype: type) -> np.ndarray:
    return np.frombuffer(values, dtype=dtype).copy() if len(values) else np.zeros(0, dtype)


def _ranks_per_host(ranks: dict[int, RankMeta]) -> int:
    hosts: dict[str, int] = {}
    for meta in ranks.values():
        hosts[meta.hostname] = hosts.get(meta.hostname, 0) + 1
    return max(hosts.values(), default=1)


def make_run(
    path: Path,
    fmt: str,
    tables: list[EventTable],
    symbols: SymbolTable,
    *,
    world_size: int,
    ranks: dict[int, RankMeta],
    problems: list[str],
    extra: dict[str, object],
) -> Run:
    """A Run as ``load_run`` would return it, for traces that were not a scalescope run."""
    events = EventTable.concat(tables) if tables else EventTable.empty(symbols)
    starts = [float(t.start_ns.min()) / 1e9 for t in tables if len(t)]
    ends = [float((t.start_ns + np.maximum(t.dur_ns, 0)).max()) / 1e9 for t in tables if len(t)]
    interrupted = any(r.status == "interrupted" for r in ranks.values())
    meta = RunMeta(
        run_id=f"{fmt}:{Path(path).name}",
        command=[],
        script=str(path),
        workload=fmt,
        options={"source": str(path), **extra},
        world_size=world_size,
        nproc_per_node=_ranks_per_host(ranks),
        launcher=fmt,
        warmup_steps=0,
        hostnames=sorted({r.hostname for r in ranks.values() if r.hostname}),
        start_time=min(starts) if starts else 0.0,
        end_time=max(ends) if ends else None,
        status="interrupted" if interrupted else "completed",
        ranks={str(r): m for r, m in sorted(ranks.items())},
    )
    return Run(path=Path(path), meta=meta, events=events, ranks=dict(ranks), problems=problems)
