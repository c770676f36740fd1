"""`scalescope run` of a real 2-rank FSDP2 script (gloo): every unit's all-gather and
reduce-scatter recorded and tagged, each rank's end recorded, and no advice to "wrap the model
in DDP". Structure only; the recorded run (tests/recorded/test_fsdp_recorded.py) holds the
comparison with torch.profiler."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections import Counter

import pytest

from conftest import SCRIPTS, cli_env, scalescope
from scalescope.events import Kind, load_run
from scalescope.probe import native
from scalescope.probe.install import WAY_VARIABLE

FSDP_TRAIN = SCRIPTS / "fsdp_train.py"
STEPS = 4


@pytest.fixture(scope="module")
def fsdp_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fsdp")
    proc = scalescope(
        "run", "-n", "2", "--run-dir", tmp / "run", FSDP_TRAIN, "--steps", STEPS, "--no-reshard",
        cwd=tmp,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc, load_run(tmp / "run")


def unit_bytes() -> dict[str, int]:
    """Each unit's parameter bytes, from the script's own model (dims already even)."""
    spec = importlib.util.spec_from_file_location("fsdp_train", FSDP_TRAIN)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    model = script.build_model()
    size = {
        f"blocks.{i}": sum(p.nbytes for p in b.parameters()) for i, b in enumerate(model.blocks)
    }
    size["root"] = sum(p.nbytes for m in (model.embed, model.head) for p in m.parameters())
    return size


def test_without_resharding_each_unit_is_gathered_once_and_reduced_once(fsdp_run) -> None:
    _proc, run = fsdp_run
    want = Counter()
    for unit, nbytes in unit_bytes().items():
        want[("all_gather", f"unshard:{unit}", nbytes)] = 1
        want[("reduce_scatter", f"reduce_grads:{unit}", nbytes)] = 1
    ev = run.events
    for rank in (0, 1):
        assert run.ranks[rank].status == "completed" and run.ranks[rank].steps == STEPS
        for step in range(STEPS):
            mask = (ev.kind == int(Kind.COLLECTIVE)) & (ev.rank == rank) & (ev.step == step)
            coll = ev.select(mask)
            got = Counter(
                zip(coll.strings("name"), coll.strings("tag"), coll.nbytes.tolist(), strict=True)
            )
            assert got == want, (rank, step)
            assert (coll.dur_ns > 0).all(), "every collective completed"


def test_the_report_shows_the_units_and_no_replica_advice(fsdp_run) -> None:
    proc, _run = fsdp_run
    assert "unshard:blocks.0" in proc.stdout and "reduce_grads:root" in proc.stdout
    assert "no data parallelism" not in proc.stdout
    assert "DistributedDataParallel(model)" not in proc.stdout


@pytest.mark.heavy
def test_bench_fsdp_shards_each_block_instead_of_ddp(tmp_path) -> None:
    proc = scalescope(
        "bench", "resnet18", "--fsdp", "-n", "2", "--steps", "3", "--warmup-steps", "1",
        "--batch-size", "2", "--image-size", "32", "--run-dir", tmp_path / "run", "--no-report",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    run = load_run(tmp_path / "run")
    coll = run.events.select(run.events.kind == int(Kind.COLLECTIVE))
    tags = set(coll.strings("tag"))
    blocks = {f"{layer}.{i}" for layer in ("layer1", "layer2", "layer3", "layer4") for i in (0, 1)}
    assert {f"unshard:{b}" for b in blocks} | {"unshard:root"} <= tags
    assert {f"reduce_grads:{b}" for b in blocks} | {"reduce_grads:root"} <= tags
    assert "gradients" not in tags, "no DDP bucket"
    assert json.loads((tmp_path / "run" / "bench.json").read_text())["options"]["fsdp"] is True


@pytest.mark.heavy
def test_without_group_hooks_the_wrappers_see_fsdp_dtensor_and_functional_ops(tmp_path) -> None:
    """What a torch without process-group hooks records (torch 2.11 on the first GPU machine):
    the dist.* wrappers see FSDP's collectives, the functional-op wrappers DTensor's all-gather
    and the functional all_reduce, each completed at its wait. (DTensor's scatter in
    distribute_tensor calls c10d's scatter by a name bound at import: not seen, docs/probe.md.)"""
    import subprocess

    steps = 2
    env = cli_env() | {WAY_VARIABLE: "wrappers"}
    cmd = [
        sys.executable, "-m", "scalescope.cli", "run", "-n", "2", "--run-dir", tmp_path / "run",
        "--no-report", FSDP_TRAIN, "--steps", str(steps), "--no-reshard", "--dtensor",
    ]  # fmt: skip
    proc = subprocess.run(
        list(map(str, cmd)), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240
    )
    assert proc.returncode == 0, proc.stderr
    run = load_run(tmp_path / "run")
    ev = run.events
    for rank in (0, 1):
        coll = ev.select((ev.kind == int(Kind.COLLECTIVE)) & (ev.rank == rank))
        rows = zip(
            coll.step.tolist(), coll.strings("name"), coll.strings("tag"), coll.nbytes.tolist(),
            strict=True,
        )  # fmt: skip
        after = Counter((name, tag, n) for step, name, tag, n in rows if step == steps)
        assert after[("all_gather", "user", 128)] == 1, rank  # DTensor's redistribution
        assert after[("all_reduce", "user", 24)] == 1, rank  # the functional all_reduce
        units = {t for t in coll.strings("tag") if t.startswith(("unshard:", "reduce_grads:"))}
        assert {"unshard:blocks.0", "unshard:root", "reduce_grads:blocks.2"} <= units
        assert (coll.dur_ns > 0).all(), "every call completed, the functional ones at their wait"


@pytest.mark.heavy
def test_tunes_reshard_knob_reaches_an_unmodified_script(tmp_path) -> None:
    """`tune`'s reshard_after_forward=false, as a trial sets it: the script asks for
    resharding, the probe's fully_shard gives False, so each unit is gathered once a step."""
    import subprocess

    from scalescope.probe.fsdp_knobs import RESHARD_ENV

    steps = 2
    env = cli_env() | {RESHARD_ENV: "false"}
    cmd = [
        sys.executable, "-m", "scalescope.cli", "run", "-n", "2", "--run-dir", tmp_path / "run",
        "--no-report", FSDP_TRAIN, "--steps", str(steps),
    ]  # fmt: skip
    proc = subprocess.run(
        list(map(str, cmd)), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240
    )
    assert proc.returncode == 0, proc.stderr
    ev = load_run(tmp_path / "run").events
    coll = ev.select((ev.kind == int(Kind.COLLECTIVE)) & (ev.rank == 0) & (ev.step == 1))
    gathers = Counter(
        t
        for n, t in zip(coll.strings("name"), coll.strings("tag"), strict=True)
        if n == "all_gather"
    )
    assert gathers == Counter({f"unshard:{unit}": 1 for unit in unit_bytes()})


def collective_rows(run_dir) -> Counter:
    ev = load_run(run_dir).events
    coll = ev.select(ev.kind == int(Kind.COLLECTIVE))
    return Counter(
        zip(
            coll.rank.tolist(),
            coll.step.tolist(),
            coll.strings("name"),
            coll.strings("tag"),
            coll.strings("group"),
            coll.seq.tolist(),
            coll.nbytes.tolist(),
            coll.count.tolist(),
            coll.strings("dtype"),
            strict=True,
        )  # fmt: skip
    )


@pytest.mark.heavy
@pytest.mark.skipif(native.load() is None, reason="the probe's C++ side is not built")
def test_the_cpp_hooks_and_the_dispatcher_record_what_the_python_hooks_record(tmp_path) -> None:
    """FSDP2 units, DTensor and a functional all_reduce, through the C++ hooks, through the
    c10d ops intercepted at the dispatcher (a torch without hooks), and with the C++ side
    turned off: the same rows, every one completed."""
    import subprocess

    runs = {}
    ways = {
        "cpp": {native.SWITCH: "1"},
        "dispatcher": {native.SWITCH: "1", WAY_VARIABLE: "dispatcher"},
        "python": {native.SWITCH: "0"},
    }
    for way, env in ways.items():
        cmd = [
            sys.executable, "-m", "scalescope.cli", "run", "-n", "2", "--run-dir",
            tmp_path / way, "--no-report", FSDP_TRAIN, "--steps", "2", "--dtensor",
        ]  # fmt: skip
        proc = subprocess.run(
            list(map(str, cmd)), cwd=tmp_path, env=cli_env() | env,
            capture_output=True, text=True, timeout=240,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        runs[way] = collective_rows(tmp_path / way)
        ev = load_run(tmp_path / way).events
        assert (ev.dur_ns[ev.kind == int(Kind.COLLECTIVE)] > 0).all(), way
    assert runs["cpp"] == runs["python"] and sum(runs["cpp"].values()) > 40
    assert runs["dispatcher"] == runs["python"]
