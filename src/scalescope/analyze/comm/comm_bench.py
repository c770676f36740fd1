"""Results of the collective micro-benchmark: nccl-tests columns, backend ratios, α-β fits.

Pure functions over the raw per-call times the ranks wrote (``comm.json``). Sizes follow
nccl-tests: ``nbytes`` is the whole buffer (all_gather's output, reduce_scatter's input),
algbw = nbytes / time and busbw = algbw x the op's bus factor for n ranks.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import msgspec

from scalescope.analyze.comm.alpha_beta import AlphaBetaFit, fit_alpha_beta
from scalescope.analyze.comm.collectives import bus_factor
from scalescope.events.files import COMM_FILE
from scalescope.ingest.nccl_tests import NcclTestsLog

REDOPS = {"all_reduce": "sum", "reduce_scatter": "sum", "reduce": "sum"}
ROOTS = {"broadcast": 0, "reduce": 0}
FACTOR_OP = {"sendrecv": "send"}
"""Ops whose bus factor nccl-tests defines under another name (sendrecv moves 1x its size)."""


@dataclass(frozen=True)
class CommRow:
    """One line of an nccl-tests table: an op at one size on one backend."""

    backend: str
    op: str
    nbytes: int
    count: int
    dtype: str
    redop: str
    root: int
    time_avg_us: float
    time_min_us: float | None
    """Fastest call; None from an nccl-tests log (it prints only the average)."""
    time_max_us: float | None
    algbw_gbps: float
    """nbytes / time_avg, GB/s with GB = 1e9 bytes."""
    busbw_gbps: float
    """algbw x bus factor (nccl-tests' definitions)."""
    iters: int


@dataclass(frozen=True)
class CommFailure:
    backend: str
    op: str
    nbytes: int
    error: str


@dataclass(frozen=True)
class BackendRatio:
    """An op at one size on ``backend`` against the first backend: time ratio other / base."""

    op: str
    nbytes: int
    base: str
    backend: str
    time_ratio: float
    busbw_ratio: float


@dataclass(frozen=True)
class CommBenchmark:
    world_size: int
    dtype: str
    iters: int
    warmup: int
    rows: tuple[CommRow, ...]
    """By backend, op, size."""
    failures: tuple[CommFailure, ...]
    unavailable: dict[str, str]
    """Backend -> why this build or machine cannot run it."""
    fits: tuple[AlphaBetaFit, ...]
    ratios: tuple[BackendRatio, ...]


def op_bus_factor(op: str, world_size: int) -> float:
    factor = bus_factor(FACTOR_OP.get(op, op), world_size)
    if factor is None:
        raise ValueError(f"no bus factor for {op}")
    return factor


def comm_row(
    backend: str, op: str, nbytes: int, count: int, dtype: str, world_size: int, times_s: list
) -> CommRow:
    """The nccl-tests columns of one size from the per-call times (max over ranks)."""
    avg_s = statistics.fmean(times_s)
    algbw = nbytes / avg_s / 1e9
    return CommRow(
        backend=backend,
        op=op,
        nbytes=nbytes,
        count=count,
        dtype=dtype,
        redop=REDOPS.get(op, "none"),
        root=ROOTS.get(op, -1),
        time_avg_us=avg_s * 1e6,
        time_min_us=min(times_s) * 1e6,
        time_max_us=max(times_s) * 1e6,
        algbw_gbps=algbw,
        busbw_gbps=algbw * op_bus_factor(op, world_size),
        iters=len(times_s),
    )


def fit_rows(rows: tuple[CommRow, ...], world_size: int) -> tuple[AlphaBetaFit, ...]:
    """One α-β fit per backend and op with two or more sizes, on the average times."""
    fits = []
    for backend, op in dict.fromkeys((r.backend, r.op) for r in rows):
        mine = [r for r in rows if r.backend == backend and r.op == op]
        if len(mine) >= 2:
            fits.append(
                fit_alpha_beta(
                    op,
                    backend,
                    world_size,
                    [r.nbytes for r in mine],
                    [r.time_avg_us / 1e6 for r in mine],
                )
            )
    return tuple(fits)


def backend_ratios(rows: tuple[CommRow, ...]) -> tuple[BackendRatio, ...]:
    """Every backend after the first against the first, at the sizes both measured."""
    backends = list(dict.fromkeys(r.backend for r in rows))
    if len(backends) < 2:
        return ()
    base = {(r.op, r.nbytes): r for r in rows if r.backend == backends[0]}
    out = []
    for r in rows:
        b = base.get((r.op, r.nbytes))
        if r.backend != backends[0] and b is not None:
            out.append(
                BackendRatio(
                    r.op,
                    r.nbytes,
                    b.backend,
                    r.backend,
                    r.time_avg_us / b.time_avg_us,
                    r.busbw_gbps / b.busbw_gbps if b.busbw_gbps > 0 else float("nan"),
                )
            )
    return tuple(out)


def comm_results(raw: dict[str, Any], unavailable: dict[str, str]) -> CommBenchmark:
    """The benchmark's results from the ranks' raw record (``comm.json``)."""
    n, dtype = int(raw["world_size"]), str(raw["dtype"])
    rows, failures = [], []
    for m in raw["measurements"]:
        if m.get("error"):
            failures.append(CommFailure(m["backend"], m["op"], int(m.get("nbytes", 0)), m["error"]))
        elif m.get("times_s"):
            rows.append(
                comm_row(m["backend"], m["op"], m["nbytes"], m["count"], dtype, n, m["times_s"])
            )
    table = tuple(rows)
    return CommBenchmark(
        world_size=n,
        dtype=dtype,
        iters=int(raw["iters"]),
        warmup=int(raw["warmup"]),
        rows=table,
        failures=tuple(failures),
        unavailable=dict(unavailable),
        fits=fit_rows(table, n),
        ratios=backend_ratios(table),
    )


NCCL_TYPES = {"float": "float32", "half": "float16", "double": "float64", "int": "int32"}


def rows_from_nccl_tests(log: NcclTestsLog) -> tuple[CommRow, ...]:
    """An nccl-tests log's out-of-place rows as CommRows (backend ``nccl-tests``), with algbw
    and busbw recomputed from its sizes and times; nccl-tests prints no min/max (None)."""
    rows = []
    for r in log.rows:
        if r.nbytes == 0 or r.time_us <= 0:
            continue
        row = comm_row(
            "nccl-tests",
            log.op,
            r.nbytes,
            r.count,
            NCCL_TYPES.get(r.dtype, r.dtype),
            log.world_size,
            [r.time_us / 1e6],
        )
        rows.append(
            replace(row, redop=r.redop, root=r.root, iters=0, time_min_us=None, time_max_us=None)
        )
    return tuple(rows)


def load_fits(path: Path) -> list[AlphaBetaFit]:
    """The α-β fits of `scalescope comm`: the ``fits`` of its ``--json`` file, or fitted here
    from the raw record a comm run leaves in its run directory (``RUN_DIR/comm.json``)."""
    source = path / COMM_FILE if path.is_dir() else path
    try:
        doc = msgspec.json.decode(source.read_bytes())
        if "fits" in doc:
            return [AlphaBetaFit(**item) for item in doc["fits"]]
        return list(comm_results(doc, {}).fits)
    except (OSError, msgspec.DecodeError, KeyError, TypeError, ValueError) as exc:
        raise ValueError(
            f"{path}: not a scalescope comm JSON or comm run directory with α-β fits ({exc})"
        ) from exc
