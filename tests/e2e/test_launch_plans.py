"""Placement plans from the CLI: the dry run, bad plans refused, `scalescope env`."""

from __future__ import annotations

import json
import os

import pytest
from machine import counted, usable_cores

from conftest import DDP_TRAIN


def test_dry_run_prints_the_plan_and_starts_nothing(cli_in_process, tmp_path):
    proc = cli_in_process(
        "run", "-n", "2", "--bind-to", "core", "--dry-run", "--run-dir", "run", str(DDP_TRAIN)
    )
    assert proc.returncode == 0, proc.stderr
    assert "OMP_PLACES={0}" in proc.stdout and "OMP_PLACES={1}" in proc.stdout
    assert "ranks from 0 of 2" in proc.stdout
    assert not (tmp_path / "run").exists()


def test_more_ranks_than_cores_is_refused(cli_in_process):
    cores = usable_cores()
    ranks = 2 * cores
    proc = cli_in_process("run", "-n", str(ranks), str(DDP_TRAIN))
    assert proc.returncode == 2
    assert f"{ranks} ranks × 1 thread = {ranks} > {counted(cores, 'core')}" in proc.stderr
    assert "--oversubscribe" in proc.stderr


@pytest.mark.heavy
def test_oversubscribe_runs_two_ranks_per_core(run_cli, tmp_path):
    cores = usable_cores()
    proc = run_cli(
        "run", "-n", str(2 * cores), "--oversubscribe", "--bind-to", "core", "--run-dir",
        "run", "--no-report", str(DDP_TRAIN), "--steps", "2",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    meta = json.loads((tmp_path / "run" / "run.json").read_text())
    assert meta["world_size"] == 2 * cores
    placed = [p["cpus"] for p in meta["placements"]]
    assert placed[:cores] == placed[cores:], "rank k and rank k + cores share a core"
    assert len({tuple(c) for c in placed}) == cores


def test_missing_numa_node_is_refused(cli_in_process):
    proc = cli_in_process("run", "-n", "1", "--numa-nodes", "3", "--dry-run", str(DDP_TRAIN))
    assert proc.returncode == 2
    assert "NUMA node" in proc.stderr and "3" in proc.stderr


def test_overlapping_cpu_lists_are_refused(cli_in_process):
    proc = cli_in_process(
        "run", "-n", "2", "--cpu-list", "0-1", "--cpu-list", "1", "--dry-run", str(DDP_TRAIN)
    )
    assert proc.returncode == 2
    assert "overlap on cpus 1" in proc.stderr


def test_threads_per_rank_above_the_cores_is_refused(cli_in_process):
    cores = usable_cores()
    threads = str(cores)
    proc = cli_in_process(
        "run", "-n", "2", "--threads-per-rank", threads, "--dry-run", str(DDP_TRAIN)
    )
    assert proc.returncode == 2
    want = f"2 ranks × {counted(cores, 'thread')} = {2 * cores} > {counted(cores, 'core')}"
    assert want in proc.stderr


def test_unknown_map_by_is_refused(cli_in_process):
    proc = cli_in_process("run", "--map-by", "rack", "--dry-run", str(DDP_TRAIN))
    assert proc.returncode == 2
    assert "rack" in proc.stderr


@pytest.mark.heavy
def test_no_bind_leaves_affinity_alone(run_cli, tmp_path):
    proc = run_cli(
        "run", "-n", "2", "--no-bind", "--run-dir", "run", "--no-report", str(DDP_TRAIN),
        "--steps", "2",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    for rank in (0, 1):
        meta = json.loads((tmp_path / "run" / "ranks" / f"rank-0000{rank}.json").read_text())
        assert meta["cpus"] == sorted(os.sched_getaffinity(0)) and not meta["bound"]
        assert meta["thread_env"]["OMP_NUM_THREADS"] == "1"


def test_env_command_prints_facts_and_writes_json(run_cli, tmp_path):
    proc = run_cli("env", "-n", "4", "--json", "env.json")
    assert proc.returncode == 0, proc.stderr
    assert "Software / build" in proc.stdout and "NUMA nodes" in proc.stdout
    doc = json.loads((tmp_path / "env.json").read_text())
    assert doc["schema"] == "scalescope.env/1"
    assert doc["hardware"]["logical_cores"] >= 1
    assert isinstance(doc["warnings"], list)


def test_allocator_that_is_not_installed_is_refused(cli_in_process):
    from scalescope.launch.placement.mapping import find_allocator

    if find_allocator("jemalloc") is not None:
        proc = cli_in_process(
            "run", "-n", "1", "--allocator", "jemalloc", "--dry-run", str(DDP_TRAIN)
        )
        assert proc.returncode == 0 and "LD_PRELOAD=" in proc.stdout
        return
    proc = cli_in_process("run", "-n", "1", "--allocator", "jemalloc", "--dry-run", str(DDP_TRAIN))
    assert proc.returncode == 2
    assert "--allocator jemalloc: no libjemalloc found" in proc.stderr


def test_default_binds_each_rank_to_its_domain(cli_in_process):
    """One NUMA node here: both ranks may use both cpus, one OpenMP thread each, unpinned."""
    proc = cli_in_process("run", "-n", "2", "--dry-run", str(DDP_TRAIN))
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if "OMP_NUM_THREADS=1" in line]
    assert len(rows) == 2 and all(" 0-1 " in row for row in rows)
    assert "OMP_PLACES" not in proc.stdout


def test_unknown_bind_to_is_refused(cli_in_process):
    proc = cli_in_process("run", "--bind-to", "socket", "--dry-run", str(DDP_TRAIN))
    assert proc.returncode == 2
    assert "--bind-to must be domain or core" in proc.stderr
