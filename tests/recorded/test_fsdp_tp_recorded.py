"""DTensor tensor and sequence parallelism under FSDP2 on a dp 2 x tp 2 mesh, recorded once
(tests/data/runs/fsdp_tp, scripts/sp_train.py: torchtitan's layout small): each group carries
its mesh dimension, FSDP's collectives run on dp and DTensor's on tp, every tp reduce-scatter
completes (gloo's have no future: they complete at their ``wait_tensor``) with the bytes the
activations' shape implies, and the findings name their dimension."""

from __future__ import annotations

import pytest
from analysed import analysed  # noqa: E402
from recorded_runs import load_scenario

from scalescope.diagnose.engine import diagnose_run
from scalescope.events import load_run

FSDP_TAGS = ("unshard:", "reduce_grads:")
SEQUENCE_PARTS_PER_STEP = 8
"""tp reduce-scatters a step of sp_train.py's: DTensor's of the embedding and of each
block's down projection and norm gradients, and each block's own by hand."""


@pytest.fixture(scope="module")
def recorded():
    scenario = load_scenario("fsdp_tp")
    run = load_run(scenario.run_dir)
    return scenario, run, analysed(run)


def test_each_group_is_its_mesh_dimension(recorded) -> None:
    _, _, analysis = recorded
    named = {g.ranks: g.dim for g in analysis.groups if g.named}
    assert named == {(0, 1): "tp", (2, 3): "tp", (0, 2): "dp", (1, 3): "dp"}


def test_fsdp_gathers_and_scatters_on_dp_and_dtensors_collectives_on_tp(recorded) -> None:
    _, _, analysis = recorded
    for o in analysis.collectives.ops:
        if o.tag.startswith(FSDP_TAGS) and o.op in ("all_gather", "reduce_scatter"):
            assert o.dim == "dp", o
        if o.tag == "user":
            assert o.dim == "tp", o


def test_every_tp_reduce_scatter_completes_with_the_activations_bytes(recorded) -> None:
    scenario, run, analysis = recorded
    (scattered,) = [o for o in analysis.collectives.ops
                    if (o.op, o.dim) == ("reduce_scatter", "tp")]  # fmt: skip
    steps = max(m.steps for m in run.ranks.values())
    assert scattered.incomplete_calls == 0
    assert scattered.calls_per_rank == SEQUENCE_PARTS_PER_STEP * steps
    assert (
        scattered.nbytes_per_rank == scattered.calls_per_rank * (scenario.truth["activation_bytes"])
    )


def test_the_findings_name_their_dimension_and_samples_count_each_tp_pair_once(
    recorded,
) -> None:
    _, run, analysis = recorded
    dims = {f.code: f.dim for f in diagnose_run(run, analysis).findings}
    assert dims["TP_COMM"] == "tp"
    assert all(dims[c] == "dp" for c in dims if c.startswith("FSDP_")) and any(
        c.startswith("FSDP_") for c in dims
    )
    assert analysis.steps.sample_copies == 2


def test_a_slow_link_inside_the_oversubscribed_host_is_its_time_slicing(recorded) -> None:
    """4 ranks on 2 cores: a rank descheduled inside a collective stretches the transfer of
    the pair it belongs to; the link is not what to fix."""
    _, run, analysis = recorded
    findings = {f.code: f for f in diagnose_run(run, analysis).findings}
    assert findings["OVERSUBSCRIBED"].level == "warning"
    link = findings["SLOW_LINK"]
    assert link.level == "info" and link.saved_ms_per_step is None
    assert link.basis.startswith("explained by OVERSUBSCRIBED: time-slicing, not the link")
