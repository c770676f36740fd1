"""`scalescope data pack / stage / bench` and `bench --data SHARDS` on images made here."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from image_folders import make_image_folder
from ports import free_port
from typer.testing import CliRunner

from conftest import cli_env, scalescope
from scalescope.bench.shard_manifest import read_manifest, validate_shard_dir
from scalescope.cli import app
from scalescope.events import load_run

CLASSES, PER_CLASS = 3, 16


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """An image folder (with ``[`` ``]`` in its name) and its shards, packed by the CLI."""
    tmp = tmp_path_factory.mktemp("data")
    folder = make_image_folder(tmp / "img[s]", CLASSES, PER_CLASS, size=40)
    proc = scalescope("data", "pack", folder, tmp / "shards", "--shard-size", "12kB", cwd=tmp)
    return tmp, folder, tmp / "shards", proc


def test_pack_writes_shards_and_manifest(data):
    _, folder, shards, proc = data
    assert proc.returncode == 0, proc.stderr
    manifest = validate_shard_dir(shards)
    files = sorted(folder.rglob("*.jpg"))
    assert manifest.images == len(files) == CLASSES * PER_CLASS
    assert sum(len(f.read_bytes()) for f in files) < manifest.nbytes
    told = f"packed {len(files)} images of {CLASSES} classes into {len(manifest.shards)} shards"
    assert told in proc.stderr
    assert "img[s]" in json.loads((shards / "manifest.json").read_text())["source"]


def test_stage_copies_once_per_node_under_torchrun(data):
    tmp, _, shards, _ = data
    dest = tmp / "node-local"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
           "--master-port", str(free_port()), "-m", "scalescope.cli", "data", "stage",
           str(shards), str(dest)]  # fmt: skip
    proc = subprocess.run(cmd, cwd=tmp, env=cli_env(), capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    manifest = read_manifest(shards)
    copied = re.findall(r"local rank (\d): staged (\d+) shards", proc.stderr)
    assert copied == [("0", str(len(manifest.shards)))]
    assert len(re.findall(r"local rank 1: .* staged by local rank 0", proc.stderr)) == 1
    assert validate_shard_dir(dest) == manifest
    again = CliRunner().invoke(app, ["data", "stage", str(shards), str(dest)])
    assert again.exit_code == 0 and "is up to date" in again.stderr


def test_data_bench_compares_folder_and_shards(data):
    tmp, folder, shards, _ = data
    proc = scalescope("data", "bench", folder, shards, "--workers", "0,1", "--images", "64",
                      "--batch-size", "8", "--image-size", "32", "--rounds", "2", "--cold",
                      cwd=tmp)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Input pipeline speed (decode + training transforms, cold)" in proc.stdout
    assert "cold: every file of every path dropped from the page cache" in proc.stdout
    rows = re.findall(r"│ (\S+)\s+│ (folder|shards) │\s+(\d) │\s+([\d.]+) │\s+(\d+), (\d+) │",
                      proc.stdout)  # fmt: skip
    assert {(kind, int(w)) for _, kind, w, *_ in rows} == {(k, w) for k in ("folder", "shards")
                                                            for w in (0, 1)}  # fmt: skip
    medians = {}
    for _, kind, workers, median, a, b in rows:
        assert float(median) == pytest.approx((int(a) + int(b)) / 2, abs=1)
        assert float(median) > 0
        medians[kind, int(workers)] = float(median)
    for w in (0, 1):
        line = re.search(rf"workers {w}: shards ([\d.]+) images/s vs folder ([\d.]+) images/s: "
                         r"ratio ([\d.]+)x", proc.stdout)  # fmt: skip
        assert line, proc.stdout
        assert float(line[3]) == pytest.approx(
            medians["shards", w] / medians["folder", w], abs=0.01
        )


@pytest.mark.heavy
def test_bench_trains_on_shards(data):
    tmp, _, shards, _ = data
    proc = scalescope(
        "bench", "resnet18", "-n", "2", "--data", shards, "--workers", "1", "--batch-size", 4,
        "--image-size", 32, "--steps", 5, "--warmup-steps", 1, "--run-dir", tmp / "run",
        "--no-report", cwd=tmp,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    run = load_run(tmp / "run")
    bench = json.loads((tmp / "run" / "bench.json").read_text())
    assert bench["data"] == str(shards.resolve())
    assert run.meta.options["data"] == str(shards)
    assert len(bench["step_times_s"]) == 5 and bench["global_batch_size"] == 8


def one_line_error(*args) -> str:
    """The error of the CLI run in this process (only `bench` starts ranks, after its checks)."""
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_bad_inputs_fail_with_one_line(data, tmp_path):
    _, folder, shards, _ = data
    out = tmp_path / "o"
    assert "size '12XB' is not like" in one_line_error("data", "pack", folder, out,
                                                       "--shard-size", "12XB")  # fmt: skip
    assert f"{shards} exists and is not an empty" in one_line_error("data", "pack", folder, shards)
    assert f"--data {tmp_path}/n[o]: does not exist" in one_line_error(
        "data", "pack", tmp_path / "n[o]", out
    )
    assert f"{folder}: no manifest.json" in one_line_error("data", "stage", folder, out)
    assert "--workers takes worker counts" in one_line_error("data", "bench", shards,
                                                             "--workers", "0,x")  # fmt: skip
    assert not out.exists()


def test_damaged_shards_are_named(data, tmp_path):
    _, _, shards, _ = data
    bad = tmp_path / "bad"
    bad.mkdir()
    for f in shards.iterdir():
        (bad / f.name).write_bytes(f.read_bytes())
    name = read_manifest(bad).shards[0].name
    raw = bytearray((bad / name).read_bytes())
    raw[512:514] = b"\0\0"  # the first image's JPEG marker: same size, does not decode
    (bad / name).write_bytes(bytes(raw))
    for workers in ("0", "1"):
        error = one_line_error("data", "bench", bad, "--workers", workers, "--image-size", "32",
                               "--rounds", "1")  # fmt: skip
        assert f"shard {bad / name}, sample" in error and "does not decode" in error
    (bad / name).write_bytes(bytes(raw[:2000]))
    error = one_line_error("bench", "resnet18", "--data", bad)
    assert f"shard {bad / name} has 2000 bytes" in error and "truncated" in error
