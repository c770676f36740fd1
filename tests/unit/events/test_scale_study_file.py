import pytest

from scalescope.events.study import ScalePoint, ScaleStudy, load_study, save_study


def test_study_round_trip(tmp_path):
    study = ScaleStudy(
        mode="strong",
        workload="resnet18",
        points=[
            ScalePoint(ranks=1, run_dir="ranks-1", samples_per_s=50.0, step_ms=320.0),
            ScalePoint(ranks=2, run_dir="ranks-2", status="failed", error="rank 1 killed"),
        ],
    )
    save_study(study, tmp_path / "s")
    assert load_study(tmp_path / "s") == study


def test_missing_and_malformed_study(tmp_path):
    with pytest.raises(ValueError, match="no scale.json"):
        load_study(tmp_path)
    (tmp_path / "scale.json").write_text('{"points": [{"ranks": "two"}]}')
    with pytest.raises(ValueError, match="malformed"):
        load_study(tmp_path)
