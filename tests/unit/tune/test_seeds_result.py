"""Seeds from the diagnosis, and the study's results: ranking, speedup, flags, knob effects."""

from __future__ import annotations

import statistics

import pytest

from scalescope.analyze.verdict import Verdict
from scalescope.diagnose.findings import Diagnosis, Finding
from scalescope.tune.result import TrialRecord, TuneResult, knob_effects
from scalescope.tune.seeds import seeds
from scalescope.tune.space import SpaceContext, parse_space

CTX = SpaceContext(nproc=2, cores=8)


def finding(code: str) -> Finding:
    return Finding(code, "b", "s", 10.0, 1.0, (), ("remedy",))


def test_seeds_follow_the_findings_remedies_within_the_space() -> None:
    space = parse_space(["bucket_cap_mb=5,25,100", "workers=0,2,4", "bf16"], CTX)
    diagnosis = Diagnosis(
        (finding("COMM_LATENCY"), finding("INPUT_BOUND")), (), Verdict("no bottleneck", note="v")
    )
    start = {"bucket_cap_mb": 25.0, "workers": 0, "bf16": False}
    out = seeds(diagnosis, space, start)
    assert [s.code for s in out] == ["COMM_LATENCY", "INPUT_BOUND"]
    assert out[0].config == {"bucket_cap_mb": 100.0, "workers": 0, "bf16": False}
    assert out[1].config == {"bucket_cap_mb": 25.0, "workers": 4, "bf16": False}


def test_no_seed_when_the_space_cannot_follow_the_remedy() -> None:
    space = parse_space(["--lr=0.1,0.2"], CTX)
    diagnosis = Diagnosis(
        (finding("COMM_LATENCY"), finding("COMPUTE")), (), Verdict("no bottleneck", note="v")
    )
    assert seeds(diagnosis, space, None) == []


def record(number: int, config: dict, status: str, rate: float | None, **kw) -> TrialRecord:
    return TrialRecord(number, config, status, rate, "samples/s", 1.0, f"t{number}", **kw)


@pytest.fixture
def result() -> TuneResult:
    space = parse_space(["bucket_cap_mb=5,25", "bf16"], CTX)
    records = (
        record(0, {"bucket_cap_mb": 25.0, "bf16": False}, "ok", 100.0, baseline=True),
        record(1, {"bucket_cap_mb": 5.0, "bf16": False}, "ok", 120.0),
        record(2, {"bucket_cap_mb": 5.0, "bf16": True}, "ok", 150.0),
        record(3, {"bucket_cap_mb": 25.0, "bf16": True}, "failed", None, error="OOM"),
        record(4, {"bucket_cap_mb": 25.0, "bf16": True}, "pruned", 40.0),
    )
    return TuneResult("w", space, records, "finished")


def test_ranking_speedup_and_semantics(result: TuneResult) -> None:
    assert [r.number for r in result.ranked()] == [2, 1, 0, 4, 3]
    assert result.best.number == 2
    assert result.speedup(result.best) == pytest.approx(1.5)
    assert result.semantics(result.records[2]) == ["the numerics: bfloat16 autocast"]
    assert result.semantics(result.records[1]) == []


def test_the_global_batch_note_gives_the_measured_sizes_once() -> None:
    space = parse_space(["nproc_per_node=1,2", "batch_size=8,16"], CTX)
    base = record(0, {"nproc_per_node": 2, "batch_size": 8}, "ok", 100.0, baseline=True,
                  samples_per_step=16.0)  # fmt: skip
    both = record(1, {"nproc_per_node": 1, "batch_size": 16}, "ok", 90.0, samples_per_step=16.0)
    ranks = record(2, {"nproc_per_node": 1, "batch_size": 8}, "ok", 90.0, samples_per_step=8.0)
    uncounted = record(3, {"nproc_per_node": 1, "batch_size": 8}, "pruned", 9.0)
    result = TuneResult("w", space, (base, both, ranks, uncounted), "finished")
    assert result.semantics(both) == []  # 2 ranks x 8 = 1 rank x 16: the same global batch
    assert result.semantics(ranks) == ["the global batch: 16 → 8 samples per step"]
    assert result.semantics(uncounted) == ["the global batch"]
    assert result.semantics(base) == []


def test_knob_effects_are_means_per_value_of_measured_trials(result: TuneResult) -> None:
    effects = {e.name: e for e in knob_effects(result)}
    assert result.effects == tuple(knob_effects(result))  # what the views draw
    bucket = dict((v, (m, n)) for v, m, n in effects["bucket_cap_mb"].means)
    assert bucket["5"] == (statistics.fmean([120.0, 150.0]), 2)
    assert bucket["25"] == (100.0, 1)  # failed and pruned trials are left out
    assert effects["bucket_cap_mb"].spread_pct == pytest.approx(100 * (135 - 100) / 135)
    assert effects["bf16"].spread_pct == pytest.approx(100 * (150 - 110) / 150)


@pytest.mark.parametrize(
    ("name", "layout"),
    [("fsdp", "FSDP2"), ("fsdp_tp", "FSDP2"), ("balanced", "DDP"), ("p2p_pipeline", None)],
)
def test_a_recorded_runs_layout_comes_from_its_collectives_tags(name, layout) -> None:
    from recorded_runs import RUNS

    from scalescope.diagnose.recording import Recording
    from scalescope.tune.seeds import recorded_layout

    coll = Recording.load(RUNS / name / "run").analysis.collectives
    assert coll is not None
    assert recorded_layout(t.tag for t in coll.per_step) == layout


def test_seeds_change_no_knob_the_recorded_layout_cannot_take() -> None:
    """A script's baseline runs FSDP2 and its diagnosis asks for larger buckets and
    channels_last: no seed sets either (DDP's buckets do nothing there, channels_last fails),
    and the study refuses channels_last before any trial spends time on it."""
    from scalescope.tune.search import refuse_failing
    from scalescope.tune.seeds import skipped_knobs

    space = parse_space(["bucket_cap_mb=5,25", "channels_last", "bf16"], CTX)
    diagnosis = Diagnosis(
        (finding("COMM_LATENCY"), finding("COMPUTE")), (), Verdict("no bottleneck", note="v")
    )
    skip = skipped_knobs({}, "FSDP2")
    assert {"channels_last", "bucket_cap_mb", "gradient_as_bucket_view"} <= set(skip)
    (only,) = seeds(diagnosis, space, None, skip)
    assert only.code == "COMPUTE"
    assert only.config == {"bucket_cap_mb": 5.0, "channels_last": False, "bf16": True}
    assert [s.code for s in seeds(diagnosis, space, None, skipped_knobs({}, "DDP"))] == [
        "COMM_LATENCY",
        "COMPUTE",
    ]
    with pytest.raises(ValueError, match=r"^the baseline runs FSDP2, which cannot take chan"):
        refuse_failing("FSDP2", space)
    refuse_failing("DDP", space)
    refuse_failing("FSDP2", parse_space(["bucket_cap_mb=5,25"], CTX))
