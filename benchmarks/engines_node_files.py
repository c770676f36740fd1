"""The node files' aggregation by three engines, side by side: ``pyarrow.dataset`` (the
baseline: record batches of bounded size, reduced with numpy), Polars (a lazy scan, collected
by its streaming engine) and DuckDB (SQL over the same pyarrow dataset, streamed), each in a
fresh child process: its wall time and peak resident memory (issue 50, item 3).

The three queries the analysis at scale needs of the node files (analyze/scale/):
- per node and step, the mean step time of its ranks (``steps`` files);
- per node and step, the slowest rank (the rank of the longest step; of a tie, the lowest);
- per subgroup (group, op, size class of the calls that only some of a node's ranks make:
  pipeline pairs), the transfer per byte: sum of transfer_min_ns over sum of bytes per call.

A node is its ranks' node in the manifest (a join with a rank -> node table, the same in all
three). Each engine's results are checked against the baseline's (totals and every slowest
rank). Polars and DuckDB are not project dependencies: they are looked for in this
interpreter, then in ``~/.cache/scalescope/engines-venv`` (``python -m venv`` there, and
``pip install polars duckdb pyarrow numpy``); an engine found in neither is skipped, saying so.

    .venv/bin/python benchmarks/engines_node_files.py --run /tmp/scale-runs/n16k-link
    .venv/bin/python benchmarks/engines_node_files.py --ranks 4096   # generates a run
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SIDE_VENV = Path.home() / ".cache" / "scalescope" / "engines-venv" / "bin" / "python"
ENGINES = ("pyarrow", "polars", "duckdb")
MODULE = {"pyarrow": "pyarrow.dataset", "polars": "polars", "duckdb": "duckdb"}
BATCH_ROWS = 1 << 17


def _paths(run: Path, table: str) -> list[str]:
    return sorted(str(p) for p in (run / "node_events").glob(f"w*/node-*.{table}.arrow"))


def _rank_nodes(run: Path) -> tuple[list[int], list[int], int]:
    manifest = json.loads((run / "node_events" / "nodes.json").read_text())
    ranks = [r for e in manifest["nodes"] for r in e["ranks"]]
    nodes = [e["node"] for e in manifest["nodes"] for _ in e["ranks"]]
    size = min(len(e["ranks"]) for e in manifest["nodes"])
    return ranks, nodes, size


def run_pyarrow(run: Path) -> dict:
    """Batches of at most BATCH_ROWS rows, reduced into dense (node, step) arrays; the
    subgroups' sums per batch by pyarrow's group_by, added up by key."""
    import numpy as np
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    ranks, nodes, size = _rank_nodes(run)
    manifest = json.loads((run / "node_events" / "nodes.json").read_text())
    n_steps = manifest["windows"][-1] + manifest["window_steps"]
    node_of = np.zeros(max(ranks) + 1, np.int64)
    node_of[ranks] = nodes
    cells = (max(nodes) + 1) * n_steps
    total, count = np.zeros(cells), np.zeros(cells, np.int64)
    best, best_rank = np.full(cells, -1, np.int64), np.full(cells, -1, np.int64)
    steps = ds.dataset(_paths(run, "steps"), format="ipc")
    for b in _bounded(steps.to_batches(columns=["rank", "step", "dur_ns"])):
        rank, step, dur = (b.column(i).to_numpy() for i in range(3))
        key = node_of[rank] * n_steps + step
        total += np.bincount(key, dur.astype(np.float64), minlength=cells)
        count += np.bincount(key, minlength=cells)
        order = np.lexsort((-rank, dur, key))  # the longest step; of a tie, the lowest rank
        k, d, r = key[order], dur[order], rank[order]
        last = np.flatnonzero(np.r_[k[1:] != k[:-1], True])
        better = d[last] > best[k[last]]
        best[k[last][better]], best_rank[k[last][better]] = d[last][better], r[last][better]
    colls = ds.dataset(_paths(run, "colls"), format="ipc")
    sub: dict[tuple, list[float]] = {}
    wanted = ["group", "op", "size_class", "calls", "bytes", "transfer_min_ns"]
    scan = colls.to_batches(columns=wanted, filter=pc.field("ranks") < size)
    for b in _bounded(scan):
        per_call = pc.divide(pc.cast(b.column("bytes"), "float64"), b.column("calls"))
        tbl = b.append_column("per_call", per_call)
        agg = tbl.group_by(["group", "op", "size_class"]).aggregate(
            [("transfer_min_ns", "sum"), ("per_call", "sum")]).to_pydict()  # fmt: skip
        for g, o, c, tr, pb in zip(agg["group"], agg["op"], agg["size_class"],
                                   agg["transfer_min_ns_sum"], agg["per_call_sum"],
                                   strict=True):  # fmt: skip
            acc = sub.setdefault((g, o, c), [0.0, 0.0])
            acc[0] += tr
            acc[1] += pb
    seen = np.flatnonzero(count)
    keys = (seen // n_steps * 1_000_000 + seen % n_steps).tolist()
    return _digest(dict(zip(keys, total[seen].tolist(), strict=True)),
                   dict(zip(keys, count[seen].tolist(), strict=True)),
                   dict(zip(keys, best_rank[seen].tolist(), strict=True)),
                   {k: v[0] / v[1] for k, v in sub.items()})  # fmt: skip


def _bounded(batches):
    """The scan's batches (a node file's chunk: a few hundred rows) gathered into tables of
    about BATCH_ROWS rows: reducing each small batch alone costs more than reading it."""
    import pyarrow as pa

    held, rows = [], 0
    for b in batches:
        held.append(b)
        rows += b.num_rows
        if rows >= BATCH_ROWS:
            yield pa.Table.from_batches(held).combine_chunks()
            held, rows = [], 0
    if held:
        yield pa.Table.from_batches(held).combine_chunks()


def run_polars(run: Path) -> dict:
    import polars as pl

    ranks, nodes, size = _rank_nodes(run)
    node = pl.LazyFrame({"rank": ranks, "node": nodes}, schema={"rank": pl.Int32, "node": pl.Int64})
    steps = pl.scan_ipc(_paths(run, "steps")).select("rank", "step", "dur_ns").join(node, on="rank")
    per = steps.group_by("node", "step").agg(
        pl.col("dur_ns").sum().alias("total"), pl.len().alias("count"),
        pl.col("rank").sort_by(["dur_ns", "rank"], descending=[True, False]).first()
        .alias("slowest"),
    ).collect(engine="streaming")  # fmt: skip
    colls = (pl.scan_ipc(_paths(run, "colls")).filter(pl.col("ranks") < size)
             .group_by("group", "op", "size_class")
             .agg(pl.col("transfer_min_ns").sum().alias("t"),
                  (pl.col("bytes") / pl.col("calls")).sum().alias("b"))
             .collect(engine="streaming"))  # fmt: skip
    keys = (per["node"] * 1_000_000 + per["step"]).to_list()
    return _digest(dict(zip(keys, per["total"].to_list(), strict=True)),
                   dict(zip(keys, per["count"].to_list(), strict=True)),
                   dict(zip(keys, per["slowest"].to_list(), strict=True)),
                   {(g, o, c): t / b for g, o, c, t, b in colls.iter_rows()})  # fmt: skip


def run_duckdb(run: Path) -> dict:
    import duckdb
    import pyarrow as pa
    import pyarrow.dataset as ds

    ranks, nodes, size = _rank_nodes(run)
    con = duckdb.connect()
    con.execute("SET threads = 2")
    node_tbl = pa.table({"rank": pa.array(ranks, pa.int32()), "node": nodes})  # noqa: F841
    steps_ds = ds.dataset(_paths(run, "steps"), format="ipc")  # noqa: F841
    colls_ds = ds.dataset(_paths(run, "colls"), format="ipc")  # noqa: F841
    per = con.execute(
        "SELECT n.node * 1000000 + s.step AS k, sum(s.dur_ns), count(*), "
        f"arg_max(s.rank, s.dur_ns * {1 << 20} - s.rank) "
        "FROM steps_ds s JOIN node_tbl n USING (rank) GROUP BY n.node, s.step"
    ).fetchall()  # fmt: skip
    sub = con.execute(
        f'SELECT "group", op, size_class, sum(transfer_min_ns) / sum(bytes / calls) '
        f"FROM colls_ds WHERE ranks < {size} GROUP BY ALL").fetchall()  # fmt: skip
    return _digest({k: float(t) for k, t, _, _ in per}, {k: c for k, _, c, _ in per},
                   {k: r for k, _, _, r in per}, {(g, o, c): v for g, o, c, v in sub})  # fmt: skip


def _digest(total: dict, count: dict, slowest: dict, per_byte: dict) -> dict:
    """What the parent compares across engines: sums and the slowest ranks whole."""
    keys = sorted(total)
    return {
        "node_steps": len(keys),
        "mean_step_ms": sum(total.values()) / max(sum(count.values()), 1) / 1e6,
        "slowest": hashlib.sha256(
            ",".join(str(int(slowest[k])) for k in keys).encode()
        ).hexdigest(),
        "subgroups": len(per_byte),
        "per_byte_max": max(per_byte.values(), default=0.0),
        "per_byte_sum": sum(per_byte.values()),
    }


def child(engine: str, run: Path) -> None:
    import importlib

    importlib.import_module(MODULE[engine])  # the import is not the query's
    t0 = time.perf_counter()
    out = {"pyarrow": run_pyarrow, "polars": run_polars, "duckdb": run_duckdb}[engine](run)
    out["wall_s"] = time.perf_counter() - t0
    print(json.dumps(out))


def interpreter(engine: str) -> str | None:
    """This interpreter when it has the engine, else the side venv's when it has it."""
    for python in (sys.executable, str(SIDE_VENV)):
        if not Path(python).exists():
            continue
        probe = subprocess.run([python, "-c", f"import {MODULE[engine]}, numpy, pyarrow"],
                               capture_output=True)  # fmt: skip
        if probe.returncode == 0:
            return python
    return None


def measure(engine: str, run: Path, python: str) -> dict:
    """The engine in a fresh child: its figures, wall time and peak RSS (MiB)."""
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen([python, __file__, "--child", engine, "--run", str(run)],
                                stdout=log)  # fmt: skip
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        log.seek(0)
        out = log.read()
    if proc.returncode != 0:
        raise RuntimeError(f"{engine} failed (exit {proc.returncode})")
    figures = json.loads(out.strip().splitlines()[-1])
    figures["peak_mib"] = usage.ru_maxrss / 1024
    return figures


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", type=Path, help="a run with node files (default: generate one)")
    p.add_argument("--ranks", type=int, default=4096, help="the generated run's ranks")
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--child", choices=ENGINES, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.child, args.run)
        return
    tmp = None
    run = args.run
    if run is None:
        tmp = Path(tempfile.mkdtemp(prefix="engines-", dir="/tmp"))
        run = tmp / "run"
        sys.path.insert(0, str(HERE))
        from synthetic_nodes import write_scale_run

        write_scale_run(run, args.ranks, args.steps, "slow_link", layout="pipeline")
    try:
        compare(run, args.repeats)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def compare(run: Path, repeats: int) -> None:
    from results import record

    base = None
    print(f"{run}: {len(_paths(run, 'steps'))} steps files, {len(_paths(run, 'colls'))} "
          "colls files")  # fmt: skip
    print(f"{'engine':<8} {'wall s':>8} {'peak MiB':>9}  agrees with pyarrow.dataset")
    for engine in ENGINES:
        python = interpreter(engine)
        if python is None:
            print(f"{engine:<8} skipped: not installed here nor in {SIDE_VENV.parent.parent}")
            continue
        runs = [measure(engine, run, python) for _ in range(repeats)]
        best = min(runs, key=lambda r: r["wall_s"])
        same = {k: v for k, v in best.items() if k not in ("wall_s", "peak_mib")}
        if base is None:
            base = same
        agree = _agrees(base, same)
        print(f"{engine:<8} {best['wall_s']:>8.1f} {best['peak_mib']:>9.0f}  {agree}")
        record(f"node files aggregated by {engine} (wall)", best["wall_s"], "s", "", None,
               f"peak {best['peak_mib']:.0f} MiB; {agree}")  # fmt: skip


def _agrees(base: dict, other: dict) -> str:
    if base["slowest"] != other["slowest"] or base["node_steps"] != other["node_steps"]:
        return "no: the slowest ranks differ"
    for k in ("mean_step_ms", "per_byte_max", "per_byte_sum"):
        if abs(base[k] - other[k]) > 1e-6 * max(abs(base[k]), 1.0):
            return f"no: {k} {other[k]} against {base[k]}"
    return "yes"


if __name__ == "__main__":
    main()
