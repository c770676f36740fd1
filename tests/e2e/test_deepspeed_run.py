"""`scalescope run` of a real 2-rank DeepSpeed script (ZeRO 3 and 2, CPU, gloo): the engine's
forward, backward and step are phases, samples are the batch configuration's, ZeRO's
collectives carry their role tags, and the parameter all-gathers move what the model's
parameters imply; and of a 2-stage ``PipelineModule`` (its stages, microbatches and sends).

DeepSpeed is an optional test dependency installed beside the venv (``make test``:
``.venv/deepspeed``, as the notebook extra); only these runs put it on the ranks' path.
Where it cannot be imported, they skip with the reason.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from analysed import analysed  # noqa: E402

from conftest import SCRIPTS, cli_env
from scalescope.events import Kind, load_run

DEEPSPEED = Path(sys.prefix) / "deepspeed"
"""Where ``make test`` installs DeepSpeed beside the venv, not in it."""
IMPORT_FAILED = re.compile(r"(ModuleNotFoundError|ImportError): .*(deepspeed|No module).*")
TRAIN = SCRIPTS / "deepspeed_train.py"
STEPS, ACCUMULATION, MICRO_BATCH = 4, 2, 16


def ds_env() -> dict[str, str]:
    env = cli_env()
    env["PYTHONPATH"] = os.pathsep.join([str(DEEPSPEED), *filter(None, [env.get("PYTHONPATH")])])
    return env


@pytest.fixture(scope="module")
def deepspeed_path() -> None:
    """Skip with the reason when DeepSpeed is not installed in ``.venv/deepspeed`` (a run
    that cannot import it skips with the import's error: ``ds_run``)."""
    if not (DEEPSPEED / "deepspeed" / "__init__.py").is_file():
        pytest.skip(f"DeepSpeed is not installed at {DEEPSPEED} (make test installs it)")


def ds_run(tmp: Path, stage: int) -> tuple[dict, object]:
    """The run with ZeRO ``stage``: the script's own line (rank 0) and the recorded run."""
    cmd = [
        sys.executable, "-m", "scalescope.cli", "run", "-n", "2", "--run-dir", str(tmp / "run"),
        "--no-report", str(TRAIN), "--stage", str(stage), "--steps", str(STEPS),
        "--accumulation", str(ACCUMULATION), "--micro-batch", str(MICRO_BATCH),
    ]  # fmt: skip
    proc = subprocess.run(cmd, cwd=tmp, env=ds_env(), capture_output=True, text=True, timeout=240)
    if proc.returncode != 0 and IMPORT_FAILED.search(proc.stderr):
        pytest.skip(
            f"DeepSpeed at {DEEPSPEED} cannot be imported: {IMPORT_FAILED.search(proc.stderr)[0]}"
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    own = next(json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{"))
    return own, load_run(tmp / "run")


def param_bytes() -> int:
    """The model's parameter bytes, from the script's own model."""
    spec = importlib.util.spec_from_file_location("deepspeed_train_model", TRAIN)
    source = TRAIN.read_text().replace("import deepspeed\n", "")  # the model needs torch only
    script = importlib.util.module_from_spec(spec)
    exec(compile(source, str(TRAIN), "exec"), script.__dict__)
    return sum(p.nbytes for p in script.build_model().parameters())


def collectives(run, rank: int, step: int) -> Counter:
    ev = run.events
    mask = (ev.kind == int(Kind.COLLECTIVE)) & (ev.rank == rank) & (ev.step == step)
    coll = ev.select(mask)
    return Counter(
        zip(coll.strings("name"), coll.strings("tag"), coll.nbytes.tolist(), strict=True)
    )


def check_phases_and_samples(own: dict, run) -> None:
    """Each measured step has the engine's phases once per micro-batch, and the time outside
    them (``other``) is small: under 20 % of the step at the median (a loaded machine may
    stretch one step)."""
    ev = run.events
    other = []
    assert own["samples_per_rank"] == MICRO_BATCH * ACCUMULATION * STEPS
    for rank in (0, 1):
        assert run.ranks[rank].status == "completed" and run.ranks[rank].steps == STEPS
        steps = ev.select((ev.kind == int(Kind.STEP)) & (ev.rank == rank))
        assert sum(steps.count.tolist()) == own["samples_per_rank"], "micro-batch x accumulation"
        for step in range(1, STEPS):
            rows = ev.select((ev.kind == int(Kind.PHASE)) & (ev.rank == rank) & (ev.step == step))
            got = Counter(rows.strings("name"))
            want = {"forward": ACCUMULATION, "backward": ACCUMULATION, "optimizer": ACCUMULATION}
            assert got == want, (rank, step)
            step_ns = int(steps.dur_ns[steps.step.tolist().index(step)])
            other.append(1 - int(rows.dur_ns.sum()) / step_ns)
    assert sorted(other)[len(other) // 2] < 0.2, other


def test_zero3_phases_samples_tags_and_gathered_bytes(deepspeed_path, tmp_path) -> None:
    own, run = ds_run(tmp_path, stage=3)
    check_phases_and_samples(own, run)
    params = param_bytes()
    assert params % 8 == 0, "the parameters split evenly over 2 ranks: no padding"
    want = Counter(
        {
            ("all_gather", "zero_gather_params", params): ACCUMULATION,
            ("reduce_scatter", "zero_reduce_grads", params): ACCUMULATION,
            ("all_reduce", "zero_step", 8): 1,
        }
    )  # fmt: skip
    for rank in (0, 1):
        assert run.ranks[rank].zero_stage == 3
        for step in range(1, STEPS):
            assert collectives(run, rank, step) == want, (rank, step)
    assert "parameters" in {tag for _op, tag, _n in collectives(run, 0, 0)}, "the engine's setup"


@pytest.mark.heavy
def test_zero2_phases_samples_tags_and_gathered_bytes(deepspeed_path, tmp_path) -> None:
    own, run = ds_run(tmp_path, stage=2)
    check_phases_and_samples(own, run)
    params = param_bytes()
    aligned = -(-params // (4 * 2 * 2)) * (4 * 2 * 2)
    """ZeRO 1/2 pad the flat fp32 buffer to 2 elements per rank (nccl_start_alignment_factor)."""
    for rank in (0, 1):
        assert run.ranks[rank].zero_stage == 2
        for step in range(1, STEPS):
            got = collectives(run, rank, step)
            assert got[("all_gather", "zero_gather_params", aligned)] == 1, got
            reduces = {k: n for k, n in got.items() if k[1] == "zero_reduce_grads"}
            assert sum(k[2] * n for k, n in reduces.items()) == ACCUMULATION * params, got
            assert all(k[1].startswith("zero_") for k in got), got


PIPE_TRAIN = SCRIPTS / "deepspeed_pipe_train.py"
PIPE_STEPS, MICROBATCHES, PIPE_MICRO_BATCH = 4, 4, 8


@pytest.mark.heavy
def test_a_pipeline_modules_stages_microbatches_and_transfers(deepspeed_path, tmp_path) -> None:
    """A 2-stage ``PipelineModule`` under ``train_batch``: each rank's stage, schedule,
    microbatches and layers in its meta; per measured step one forward and one backward row
    per microbatch (``seq`` 0..m-1) and one optimizer row; each microbatch's activations sent
    to the next stage and its gradients back, as p2p rows with their peer; samples on the
    first stage; and the analysis sees the pipeline."""
    cmd = [
        sys.executable, "-m", "scalescope.cli", "run", "-n", "2",
        "--run-dir", str(tmp_path / "run"),
        "--no-report", str(PIPE_TRAIN), "--steps", str(PIPE_STEPS), "--microbatches",
        str(MICROBATCHES), "--micro-batch", str(PIPE_MICRO_BATCH),
    ]  # fmt: skip
    proc = subprocess.run(cmd, cwd=tmp_path, env=ds_env(), capture_output=True, text=True,
                          timeout=240)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    own = next(json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{"))
    run = load_run(tmp_path / "run")
    ev = run.events
    for rank in (0, 1):
        meta = run.ranks[rank]
        assert meta.steps == PIPE_STEPS and not meta.probe_errors, meta.probe_errors
        pipe = meta.pipeline
        assert (pipe.stage, pipe.stages, pipe.microbatches) == (rank, 2, MICROBATCHES)
        assert pipe.schedule == "DeepSpeed TrainSchedule (1F1B)"
        layers = [name for name in own["stage_layers"][rank] if name.isdigit()]
        assert [b.name for b in pipe.blocks] == layers, "the stage's layers, not its loss"
        peer, (out, back) = 1 - rank, ("send", "recv") if rank == 0 else ("recv", "send")
        steps = ev.select((ev.kind == int(Kind.STEP)) & (ev.rank == rank))
        samples = PIPE_MICRO_BATCH * MICROBATCHES if rank == 0 else 0
        assert steps.count.tolist() == [samples] * PIPE_STEPS
        for step in range(1, PIPE_STEPS):
            mine = (ev.rank == rank) & (ev.step == step)
            phases = ev.select(mine & (ev.kind == int(Kind.PHASE)))
            for name in ("forward", "backward"):
                seqs = sorted(phases.seq[phases.where("name", name)].tolist())
                assert seqs == list(range(MICROBATCHES)), (rank, step, name)
            assert Counter(phases.strings("name"))["optimizer"] == 1
            p2p = ev.select(mine & (ev.kind == int(Kind.COLLECTIVE)) & (ev.peer >= 0))
            got = Counter(zip(p2p.strings("name"), p2p.strings("tag"), p2p.peer.tolist(),
                              strict=True))  # fmt: skip
            want = {(out, "pipe_activations", peer): MICROBATCHES,
                    (back, "pipe_grads", peer): MICROBATCHES}  # fmt: skip
            assert got == want, (rank, step)
    pipeline = analysed(run).pipeline
    assert pipeline is not None and pipeline.schedule == "DeepSpeed TrainSchedule (1F1B)"
    assert (pipeline.stages, pipeline.microbatches) == (2, MICROBATCHES)
    assert [(f.rank, f.stage) for f in pipeline.ranks] == [(0, 0), (1, 1)]
