"""`project --validate`: which fitted size a held-out one is predicted from, what of the
held-out run the prediction may use, the error's sign and the refusals."""

from __future__ import annotations

from dataclasses import replace

import pytest
from predict_inputs import inputs

from scalescope.events.study import ScalePoint, ScaleStudy, save_study
from scalescope.predict.inputs import Placement
from scalescope.predict.validate import predict_held_out, validate_study


def sized(ranks: int, threads: int = 1, **changes: object):
    per_node = Placement(ranks_per_node=ranks, threads_per_rank=threads, node_cores=2)
    return inputs(world_size=ranks, placement=per_node, **changes)


def test_the_reference_is_the_largest_fitted_size_with_the_same_threads():
    fitted = [sized(1, threads=1), sized(2, threads=1), sized(3, threads=2)]
    held = predict_held_out(fitted, sized(4, threads=1), None, "ring")
    assert held.reference_ranks == 2
    held = predict_held_out(fitted, sized(4, threads=4), None, "ring")
    assert held.reference_ranks == 3, "no size with 4 threads: the largest"


def test_the_prediction_uses_nothing_measured_in_the_held_out_run():
    fitted = [sized(1), sized(2)]
    quick = predict_held_out(fitted, sized(3, compute_ms=50.0, step_ms=60.0), None, "ring")
    slow = predict_held_out(fitted, sized(3, compute_ms=500.0, step_ms=600.0), None, "ring")
    assert quick.predicted_step_ms == slow.predicted_step_ms
    assert (quick.measured_step_ms, slow.measured_step_ms) == (60.0, 600.0)


def test_the_error_is_predicted_over_measured_throughput():
    held = predict_held_out([sized(1), sized(2)], sized(3), None, "ring")
    expected = 3 * 8.0 / (held.predicted_step_ms / 1e3)
    assert held.predicted_samples_per_s == pytest.approx(expected)
    measured = replace(held, measured_samples_per_s=expected / 1.25)
    assert measured.error_pct == pytest.approx(25.0)
    assert replace(held, measured_samples_per_s=expected * 2).error_pct == pytest.approx(-50.0)


@pytest.mark.parametrize(
    ("points", "holdout", "message"),
    [
        ([ScalePoint(ranks=2, status="failed", error="x")], 1, "0 completed sizes"),
        ([], 0, "validating 0 held-out size(s)"),
    ],
)
def test_a_study_without_a_size_to_fit_on_is_refused(tmp_path, points, holdout, message):
    save_study(ScaleStudy(points=points), tmp_path)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        validate_study(tmp_path, holdout)


def test_a_missing_study_is_named(tmp_path):
    with pytest.raises(ValueError, match="no scale.json"):
        validate_study(tmp_path / "nowhere")


def test_a_study_with_no_completed_size_cannot_be_projected(tmp_path):
    from scalescope.predict.project import ProjectOptions, project_run

    save_study(ScaleStudy(points=[ScalePoint(ranks=2, status="failed", error="x")]), tmp_path)
    with pytest.raises(ValueError, match="the scale study has no completed size to project"):
        project_run(tmp_path, ProjectOptions(nodes=(1,)))


def test_a_held_out_size_with_fewer_threads_keeps_the_fitted_serial_part():
    """16 cores, 16 / ranks threads; compute per sample 2 + 48 / threads ms: from 4 ranks
    (14 ms a sample) to 8 (26), not twice as slow as the linear rule has it."""

    def on16(ranks: int):
        threads = 16 // ranks
        placement = Placement(ranks_per_node=ranks, threads_per_rank=threads, node_cores=16)
        return inputs(world_size=ranks, placement=placement,
                      compute_ms=8.0 * (2.0 + 48.0 / threads))  # fmt: skip

    fitted = [on16(r) for r in (1, 2, 4)]
    held = predict_held_out(fitted, on16(8), None, "ring")
    assert held.reference_ranks == 4
    assert held.terms.compute_ms == pytest.approx(8.0 * 26.0)
    one = predict_held_out(fitted[2:], on16(8), None, "ring")
    assert one.terms.compute_ms == pytest.approx(8.0 * 28.0), "one size: the linear rule"


def test_the_validation_names_its_compute_model():
    import json

    from scalescope.predict.cores import CoreScaling, linear
    from scalescope.predict.validate import Validation
    from scalescope.report.views.project import core_scaling_line, validation_json

    fit = CoreScaling(serial_ms=2.0, parallel_ms=48.0, threads=(16, 8, 4), fitted=True,
                      note="fitted on threads 16, 8, 4")  # fmt: skip
    assert core_scaling_line(fit) == (
        "compute per sample 2.000 + 48.000 / threads ms (4% serial at one thread; "
        "fitted on threads 16, 8, 4)"
    )
    assert core_scaling_line(linear((1, 1), "one thread count")).startswith(
        "compute linear in a rank's cores (one thread count"
    )
    held = predict_held_out([sized(1), sized(2)], sized(3), None, "ring")
    v = Validation(study_dir="s", fitted_ranks=(1, 2), held_out=(held,), hop_source="x",
                   core_scaling=fit)  # fmt: skip
    doc = json.loads(validation_json(v))
    assert doc["core_scaling"]["serial_ms"] == 2.0 and doc["core_scaling"]["threads"] == [16, 8, 4]
