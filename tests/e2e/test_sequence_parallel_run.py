"""Tensor and sequence parallelism under FSDP2 on a 2-D mesh (4 ranks, gloo), torchtitan's
layout small (scripts/sp_train.py): under the probe it trains to the same losses as without
it, and its tp and dp collectives are recorded by dimension. Before the probe left gloo's
reduce-scatter works to their callers, its second wait rewrote their outputs and torchtitan's
forward stopped on autograd's view+inplace check (docs/probe.md, torchtitan on CPU)."""

from __future__ import annotations

import json

import pytest
from analysed import analysed  # noqa: E402

from conftest import SCRIPTS, scalescope
from scalescope.events import load_run

SP_TRAIN = SCRIPTS / "sp_train.py"
STEPS, RANKS, BLOCKS = 3, 4, 2
ACTIVATION_BYTES = 4 * 16 * 32 * 4
"""sp_train.py's activations, (BATCH, SEQ, WIDTH) float32: a tp reduce-scatter's input."""


def _run(tmp, name: str, *extra: str) -> list[float]:
    proc = scalescope(
        "run", "-n", RANKS, "--oversubscribe", "--run-dir", tmp / name, "--no-report", *extra,
        SP_TRAIN, "--steps", STEPS, "--losses", tmp / f"{name}.json", cwd=tmp,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((tmp / f"{name}.json").read_text())


@pytest.mark.heavy
def test_sequence_parallel_trains_as_without_the_probe_and_records_tp_and_dp(tmp_path):
    probed = _run(tmp_path, "probed")
    assert probed == _run(tmp_path, "plain", "--no-probe"), "the probe changed the training"
    run = load_run(tmp_path / "probed")
    assert all(m.status == "completed" for m in run.ranks.values())
    ops = analysed(run).collectives.ops
    calls = {(o.op, o.dim): o.calls for o in ops}
    units = BLOCKS + 2  # FSDP2's: the embedding, each block, the root
    assert calls[("reduce_scatter", "dp")] >= STEPS * units
    assert calls[("all_gather", "dp")] >= STEPS * units
    reduced = BLOCKS + 1 + BLOCKS  # DTensor's (embedding, down), the blocks' own
    assert calls[("reduce_scatter", "tp")] >= STEPS * reduced, "the sequence's parts"
    assert calls[("all_gather", "tp")] >= STEPS * (BLOCKS + 1)  # the inputs of up and out
    scattered = [o for o in ops if (o.op, o.dim) == ("reduce_scatter", "tp")]
    assert all(o.incomplete_calls == 0 for o in scattered), "DTensor's complete at wait_tensor"
    for o in scattered:  # every one the whole activation, by the nccl-tests convention
        assert o.nbytes_per_rank == pytest.approx(o.calls_per_rank * ACTIVATION_BYTES)
