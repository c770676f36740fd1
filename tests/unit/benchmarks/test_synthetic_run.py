"""benchmarks/synthetic_run.py: its runs behave as a real job's do (collectives end together,
early ranks wait, clocks offset and drifting but alignable), its plants are where it says, and
the analysis reads them without a wait over the step; the 3d layout (pp x dp x tp, 1F1B) as
the analysis of a real model-parallel run reads it: stages, schedule, dimensions, pairs, the
bubble against the theory, samples per replica and a heavy stage."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))

from analysed import analysed  # noqa: E402

from scalescope.analyze.ranks.clocks import align_clocks, aligned_start_ns  # noqa: E402
from scalescope.diagnose.engine import diagnose_run  # noqa: E402
from scalescope.events import Kind, load_run  # noqa: E402
from synthetic_3d import ACT_BYTES, MICRO_SAMPLES, NET_BYTES_PER_NS  # noqa: E402
from synthetic_run import (  # noqa: E402
    BUCKETS,
    EXIT_JITTER_NS,
    MS,
    RANKS_PER_NODE,
    WARMUP_STEPS,
    Plant,
    transfer_ns,
    write_run,
)

RANKS, STEPS = 16, 50
CLOCK_SLACK_NS = 30_000
"""Measured offsets are off by up to a quarter of a 30 µs uncertainty on each of two ranks,
plus 1 ppm of drift over the run's ~6 s."""


@pytest.fixture(scope="module")
def slow_node(tmp_path_factory):
    path = tmp_path_factory.mktemp("synthetic") / "run"
    truth = write_run(path, RANKS, STEPS, "slow_node", seed=3)
    return truth, load_run(path)


def collectives(run) -> dict[str, np.ndarray]:
    """Per (rank, seq) on rank 0's clock: issue, arrival (after the rank's previous
    collective), end; arrays (ranks, collectives); and nbytes per collective."""
    events = run.events
    mask = events.kind == int(Kind.COLLECTIVE)
    issue = aligned_start_ns(events, align_clocks(run))[mask]
    rank, seq, dur = events.rank[mask], events.seq[mask], events.dur_ns[mask]
    order = np.lexsort((seq, rank))
    shape = (len(np.unique(rank)), -1)
    issue, dur = issue[order].reshape(shape), dur[order].reshape(shape)
    end = issue + dur
    arrival = issue.copy()
    arrival[:, 1:] = np.maximum(issue[:, 1:], end[:, :-1])
    return {"issue": issue, "arrival": arrival, "end": end,
            "nbytes": events.nbytes[mask][order].reshape(shape)[0]}  # fmt: skip


def test_a_collective_ends_on_every_rank_together_after_the_last_arrival(slow_node):
    _, run = slow_node
    c = collectives(run)
    last = c["arrival"].max(axis=0)
    spread = c["end"].max(axis=0) - c["end"].min(axis=0)
    assert spread.max() <= EXIT_JITTER_NS + CLOCK_SLACK_NS
    least = np.array([transfer_ns(int(b), RANKS, b in BUCKETS) for b in c["nbytes"]])
    assert (c["end"].min(axis=0) - last >= 0.5 * least - CLOCK_SLACK_NS).all()


def test_ranks_that_arrive_early_wait_and_all_stay_in_step(slow_node):
    truth, run = slow_node
    c = collectives(run)
    wait = c["arrival"].max(axis=0) - c["arrival"]
    assert (wait.max(axis=0) > 1 * MS).mean() > 0.5, "most instances keep someone waiting"
    steps = run.events.kind == int(Kind.STEP)
    start = aligned_start_ns(run.events, align_clocks(run))[steps]
    last_step = run.events.step[steps] == STEPS - 1
    assert np.ptp(start[last_step]) < 0.1 * truth.step_ms * MS, "no drift apart over the run"


def test_clocks_are_offset_per_host_and_the_samples_align_them(slow_node):
    truth, run = slow_node
    other_host = np.arange(RANKS) >= RANKS_PER_NODE
    assert (np.abs(truth.clock_offset_ns[other_host]) > 1e6).all(), "hosts' clocks differ"
    assert (truth.clock_offset_ns[~other_host] == 0).all(), "one host, one clock"
    assert (truth.drift_ppm[other_host] != 0).all()
    for rank, meta in run.ranks.items():
        start = {s.when: s for s in meta.clock}.get("start")
        if rank == 0:
            assert start is None
            continue
        assert abs(start.offset_ns - truth.clock_offset_ns[rank]) <= start.uncertainty_ns


def test_the_slow_node_is_its_eight_ranks_and_they_compute_slower(slow_node):
    truth, run = slow_node
    assert truth.plant == "slow_node"
    assert len(truth.slow_ranks) == RANKS_PER_NODE
    assert {run.ranks[r].hostname for r in truth.slow_ranks} == {truth.slow_node}
    assert run.meta.hostnames == ["node000", "node001"]
    events = run.events
    backward = (events.kind == int(Kind.PHASE)) & (events.name == events.symbols.intern("backward"))
    per_rank = np.bincount(events.rank[backward], weights=events.dur_ns[backward]) / STEPS
    slow = np.isin(np.arange(RANKS), truth.slow_ranks)
    ratio = per_rank[slow].mean() / per_rank[~slow].mean()
    assert 1.2 < ratio < 1.4


def test_the_analysis_waits_match_the_truth_and_stay_under_the_step(slow_node):
    truth, run = slow_node
    cross = analysed(run).cross_rank
    assert cross is not None and cross.unmatched_instances == 0
    waits = np.array([w.wait_ms_per_step for w in cross.ranks])
    assert (waits < truth.step_ms).all()
    assert np.abs(waits - truth.wait_ms_per_step).max() < 1.0
    slow = np.isin(np.arange(RANKS), truth.slow_ranks)
    assert waits[~slow].min() > waits[slow].max(), "the fast ranks wait for the slow node"


def test_a_slow_link_slows_every_rank_of_the_collectives_that_cross_it_at_once(tmp_path):
    """Physical: a ring over all ranks crosses the link, so the world group's all-reduces
    transfer slower for everyone and still end together (no rank is late)."""
    truth = write_run(tmp_path / "run", 16, 12, Plant("slow_link", target=0))
    assert truth.slow_link == ("node000", "node001")
    c = collectives(load_run(tmp_path / "run"))
    spread = c["end"].max(axis=0) - c["end"].min(axis=0)
    assert spread.max() <= EXIT_JITTER_NS + CLOCK_SLACK_NS, "they still end together"
    big = c["nbytes"] == max(BUCKETS)
    transfer = (c["end"].min(axis=0) - c["arrival"].max(axis=0))[big]
    slow = transfer_ns(max(BUCKETS), 16, True, truth.factor)
    assert (transfer > 0.8 * slow).all() and (transfer < 1.2 * slow).all()


def pair_instances(run) -> dict[str, np.ndarray]:
    """The pipeline layout's send/recv rows by (group, seq) on rank 0's clock: per instance
    its two ranks, its last arrival (issue: the pair's previous instance is a step back) and
    its end (the later completion)."""
    events = run.events
    p2p = np.isin(events.name, [events.symbols.id_of("send"), events.symbols.id_of("recv")])
    issue = aligned_start_ns(events, align_clocks(run))[p2p]
    group, seq, rank = events.group[p2p], events.seq[p2p], events.rank[p2p]
    order = np.lexsort((rank, seq, group))
    shape = (-1, 2)
    end = (issue + events.dur_ns[p2p])[order].reshape(shape)
    return {"ranks": rank[order].reshape(shape), "last": issue[order].reshape(shape).max(1),
            "end": end.max(1), "group": group[order].reshape(shape)[:, 0]}  # fmt: skip


def test_the_pipeline_layout_pairs_each_rank_with_the_next_node_in_groups_of_two(tmp_path):
    truth = write_run(tmp_path / "run", 24, 12, layout="pipeline")
    run = load_run(tmp_path / "run")
    assert truth.layout == "pipeline"
    rows_per_step = np.bincount(run.events.rank) / 12
    assert (rows_per_step == 13).all()
    p = pair_instances(run)
    assert len(p["ranks"]) == 24 * 12, "one instance per pair and step, on both of its ranks"
    a, b = p["ranks"].T
    forward = (a + RANKS_PER_NODE) % 24 == b
    assert (forward | ((b + RANKS_PER_NODE) % 24 == a)).all(), "the same local rank, next node"
    sender = np.where(forward, a, b)
    labels = np.array(run.events.names(p["group"]))
    assert (labels == (1 + sender).astype(str)).all(), "each pair its own group: 1 + sender"
    analysis = analysed(run)
    assert analysis.cross_rank is not None and analysis.cross_rank.unmatched_instances == 0
    colls = run.events.of_kind(Kind.COLLECTIVE)
    sends, recvs = colls.where("name", "send"), colls.where("name", "recv")
    ahead = (colls.rank + RANKS_PER_NODE) % 24
    assert (colls.peer[sends] == ahead[sends]).all(), "a send goes to the next node"
    behind = (colls.peer[recvs] + RANKS_PER_NODE) % 24
    assert (behind == colls.rank[recvs]).all(), "a recv from the node before"
    assert (colls.peer[~(sends | recvs)] == -1).all()
    assert analysis.p2p is not None and analysis.p2p.unpaired == 0
    assert analysis.p2p.pairs == 24 * 12, "each send paired with its recv"


def test_a_slow_link_slows_the_pairs_between_its_two_nodes_only(tmp_path):
    truth = write_run(tmp_path / "run", 24, 12, Plant("slow_link", target=1), layout="pipeline")
    assert truth.slow_link == ("node001", "node002")
    p = pair_instances(load_run(tmp_path / "run"))
    nodes = np.sort(p["ranks"] // RANKS_PER_NODE, axis=1)
    crossing = (nodes == [1, 2]).all(axis=1)
    transfer = p["end"] - p["last"]
    assert crossing.sum() == 8 * 12
    ratio = np.median(transfer[crossing]) / np.median(transfer[~crossing])
    assert 3.5 < ratio < 4.2


def test_a_hang_leaves_the_others_in_an_unfinished_collective(tmp_path):
    truth = write_run(tmp_path / "run", 16, 20, Plant("hang", target=5, at_step=12))
    assert (truth.hang_rank, truth.hang_step, truth.steps) == (5, 12, 12)
    run = load_run(tmp_path / "run")
    events = run.events
    assert events.step[events.rank == 5].max() == 11, "the hung rank never starts step 12"
    pending = events.dur_ns < 0
    assert sorted(np.unique(events.rank[pending])) == [r for r in range(16) if r != 5]
    assert (events.kind[pending] == int(Kind.COLLECTIVE)).all()
    assert (events.step[pending] == 12).all()
    assert len(np.unique(events.seq[pending])) == 1, "all wait in the same instance"
    assert run.meta.status == "interrupted"
    assert {m.status for m in run.ranks.values()} == {"interrupted"}


# --- the 3d layout: pp x dp x tp with a 1F1B schedule ----------------------------------------

PP, TP, MICRO_3D, STEPS_3D = 2, 2, 8, 10
RANKS_3D = 32
DP = RANKS_3D // (PP * TP)
LANES = DP * TP


@pytest.fixture(scope="module")
def balanced_3d(tmp_path_factory):
    path = tmp_path_factory.mktemp("synthetic") / "run"
    truth = write_run(path, RANKS_3D, STEPS_3D, seed=3, layout="3d", pp=PP, tp=TP,
                      micro=MICRO_3D)  # fmt: skip
    run = load_run(path)
    return truth, run, analysed(run)


@pytest.fixture(scope="module")
def heavy_3d(tmp_path_factory):
    path = tmp_path_factory.mktemp("synthetic") / "run"
    truth = write_run(path, RANKS_3D, STEPS_3D, Plant("heavy_stage", target=1), seed=4,
                      layout="3d", pp=PP, tp=TP, micro=MICRO_3D)  # fmt: skip
    run = load_run(path)
    return truth, run, analysed(run)


def test_the_3d_ranks_name_their_mesh_groups_tp_innermost_inside_a_node(balanced_3d):
    _, run, analysis = balanced_3d
    for rank, meta in run.ranks.items():
        by_dim = {g.dim: g.ranks for g in meta.groups.values()}
        stage, lane = divmod(rank, LANES)
        first = rank - rank % TP
        assert by_dim["tp"] == list(range(first, first + TP))
        assert by_dim["dp"] == list(range(stage * LANES + lane % TP, (stage + 1) * LANES, TP))
        assert by_dim["pp"] == [lane + s * LANES for s in range(PP)]
        assert len({run.ranks[r].hostname for r in by_dim["tp"]}) == 1, "tp inside a node"
        assert (meta.pipeline.stage, meta.pipeline.stages) == (stage, PP)
        assert (meta.pipeline.schedule, meta.pipeline.microbatches) == ("Schedule1F1B", MICRO_3D)
    dims = {d.dim: d for d in analysis.dims}
    assert set(dims) == {"tp", "dp", "pp"} and all(d.named for d in dims.values())
    shape = {d: (dims[d].groups, dims[d].ranks_per_group) for d in dims}
    assert shape == {"tp": (RANKS_3D // TP, TP), "dp": (PP * TP, DP), "pp": (LANES, PP)}
    measured = STEPS_3D - WARMUP_STEPS
    per_rank = {d: dims[d].calls / RANKS_3D / measured for d in dims}
    assert per_rank == {"tp": 2 * 2 * MICRO_3D, "dp": 2, "pp": 2 * MICRO_3D}


def test_the_3d_analysis_finds_the_stages_the_schedule_and_its_microbatches(balanced_3d):
    _, run, analysis = balanced_3d
    pipe = analysis.pipeline
    assert (pipe.stages, pipe.schedule, pipe.microbatches) == (PP, "Schedule1F1B", MICRO_3D)
    assert {f.rank: f.stage for f in pipe.ranks} == {r: r // LANES for r in range(RANKS_3D)}
    ev = run.events
    forward = ev.select((ev.kind == Kind.PHASE) & (ev.name == ev.symbols.id_of("forward")))
    per_step = forward.select((forward.rank == 5) & (forward.step == STEPS_3D - 1))
    assert sorted(per_step.seq.tolist()) == list(range(MICRO_3D)), "one forward a microbatch"


def test_each_3d_send_is_paired_with_its_recv_on_the_pp_group(balanced_3d):
    _, run, analysis = balanced_3d
    pairs_per_step = LANES * (PP - 1) * 2 * MICRO_3D  # activations forward, gradients back
    assert analysis.p2p.pairs == pairs_per_step * STEPS_3D and analysis.p2p.unpaired == 0
    for t in analysis.p2p.peers:
        assert abs(t.peer - t.rank) == LANES, "the same lane of the next or previous stage"
        assert run.ranks[t.rank].groups[t.group].dim == "pp"
    assert analysis.cross_rank.unmatched_instances == 0


def test_a_3d_stage_starts_a_forward_only_once_its_activations_arrived(balanced_3d):
    """On rank 0's clock: each stage-1 forward of microbatch j starts after the stage-0
    forward of j on the same lane ended, by the activations' transfer (at least half its
    mean: each varies)."""
    _, run, _ = balanced_3d
    ev = run.events
    start = aligned_start_ns(ev, align_clocks(run))
    fwd = (ev.kind == Kind.PHASE) & (ev.name == ev.symbols.id_of("forward"))
    rank, step, seq = ev.rank[fwd], ev.step[fwd], ev.seq[fwd]
    begin, end = start[fwd], start[fwd] + ev.dur_ns[fwd]
    order = np.lexsort((rank % LANES, seq, step, rank // LANES))
    half = len(order) // 2
    sender, receiver = order[:half], order[half:]
    assert (rank[receiver] - rank[sender] == LANES).all()
    assert (seq[receiver] == seq[sender]).all() and (step[receiver] == step[sender]).all()
    gap = begin[receiver] - end[sender]
    assert (gap > 0.5 * ACT_BYTES / NET_BYTES_PER_NS - CLOCK_SLACK_NS).all()


def test_the_balanced_3d_bubble_is_the_1f1b_theory(balanced_3d):
    """(p-1)/(m+p-1) of the step, plus what the step holds besides the pipeline: the data,
    the dp all-reduce and the optimizer's neighbours (under 3 points of the step)."""
    _, _, analysis = balanced_3d
    pipe = analysis.pipeline
    assert pipe.theory_bubble_pct == pytest.approx(100 * (PP - 1) / (MICRO_3D + PP - 1))
    bubbles = np.array([f.bubble_pct for f in pipe.ranks])
    assert (bubbles >= pipe.theory_bubble_pct).all()
    assert (bubbles <= pipe.theory_bubble_pct + 3).all()


def test_the_3d_samples_count_each_dp_replica_once(balanced_3d):
    truth, _, analysis = balanced_3d
    steps = analysis.steps
    measured = STEPS_3D - WARMUP_STEPS
    assert steps.sample_copies == TP
    assert steps.total_samples == DP * MICRO_3D * MICRO_SAMPLES * measured
    expected = DP * MICRO_3D * MICRO_SAMPLES / (truth.step_ms / 1e3)
    assert steps.samples_per_s == pytest.approx(expected, rel=0.02)


def test_a_heavy_stage_bounds_the_pipeline_without_a_straggler(heavy_3d):
    truth, run, analysis = heavy_3d
    assert (truth.heavy_stage, truth.blocks) == (1, (4, 6))
    pipe = analysis.pipeline
    assert pipe.bound_stage == 1
    assert (pipe.move.source, pipe.move.target, pipe.move.names) == (1, 0, ("4",))
    findings = {f.code: f for f in diagnose_run(run, analysis).findings}
    assert "STAGE_IMBALANCE" in findings and findings["STAGE_IMBALANCE"].rank // LANES == 1
    assert not {"STRAGGLER", "NODE_STRAGGLER", "LOAD_IMBALANCE"} & set(findings)
    dims = {code: f.dim for code, f in findings.items() if f.dim}
    assert dims["STAGE_IMBALANCE"] == "pp", "the stages send over the pp groups"
    assert abs(pipe.move.replay_error_pct) <= 3, "the 1F1B replay fits the generated step"
    assert all(dims[c] == "tp" for c in dims if c.startswith("TP_")) and "TP_COMM" in dims


def test_the_moves_replayed_step_is_the_run_regenerated_with_the_block_moved(
    heavy_3d, tmp_path, monkeypatch
):
    """The heavy stage's run (blocks 4 and 6) proposes moving block 4; the same run generated
    with blocks 5 and 5 is the truth: its step within 3 % of the replay's, its gain within
    5 % (the old formula, (m + p - 1) x the slowest stage's saving, said 66 ms of ~52)."""
    import synthetic_run

    truth, _, analysis = heavy_3d
    move = analysis.pipeline.move
    monkeypatch.setattr(synthetic_run, "stage_blocks", lambda mesh, heavy, factor: [5, 5])
    moved = write_run(tmp_path / "run", RANKS_3D, STEPS_3D, Plant("heavy_stage", target=1),
                      seed=4, layout="3d", pp=PP, tp=TP, micro=MICRO_3D)  # fmt: skip
    assert moved.blocks == (5, 5)
    assert move.predicted_step_ms == pytest.approx(moved.step_ms, rel=0.03)
    assert move.gain_ms == pytest.approx(truth.step_ms - moved.step_ms, rel=0.05)


def test_a_plant_from_mid_run_leaves_the_steps_before_it_as_without_it(tmp_path):
    """``Plant.from_step``: the same noise seed draws the same jitter, so the steps before
    the onset are the clean run's to the nanosecond, and the slow rank's after it are longer."""

    def forward_ns(plant: Plant | None, name: str) -> np.ndarray:
        write_run(tmp_path / name, 16, 12, plant, seed=1)
        e = load_run(tmp_path / name).events
        mine = (
            (e.rank == 5) & (e.kind == int(Kind.PHASE)) & (np.array(e.names(e.name)) == "forward")
        )
        return e.dur_ns[mine]

    planted = forward_ns(Plant("slow_rank", 5, 1.3, from_step=6), "planted")
    clean = forward_ns(None, "clean")
    assert (planted[:6] == clean[:6]).all()
    assert (planted[6:] > 1.2 * clean[6:]).all()
    with pytest.raises(ValueError, match="can begin mid-run"):
        write_run(tmp_path / "hang", 16, 12, Plant("hang", 5, from_step=3))


def test_the_bound_stage_s_cost_is_the_run_regenerated_without_it(heavy_3d, tmp_path):
    """The heavy stage (6 blocks against 4) costs what the same run generated with 4 blocks
    saves (within 5 %): the bubble's finding names that stage, and that is its saving."""
    truth, run, analysis = heavy_3d
    clean = write_run(tmp_path / "run", RANKS_3D, STEPS_3D, seed=4, layout="3d", pp=PP, tp=TP,
                      micro=MICRO_3D)  # fmt: skip
    gain = truth.step_ms - clean.step_ms
    assert analysis.pipeline.paced.gain_ms == pytest.approx(gain, rel=0.05)
    bubble = {f.code: f for f in diagnose_run(run, analysis).findings}["PIPELINE_BUBBLE"]
    assert bubble.saved_ms_per_step == pytest.approx(gain, rel=0.05)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"pp": 1}, "needs --pp 2 or more"),
        ({"tp": 3}, "--tp 3 must divide the 8 ranks of a node"),
        ({"micro": 0}, "--micro must be 1 or more"),
        ({"pp": 3}, "32 ranks are not a whole number of pp x tp = 6"),
        ({"plant": "slow_node"}, "the 3d layout plants only heavy_stage"),
        ({"plant": Plant("heavy_stage", target=2)}, "stage 2 is not one of the pipeline's 2"),
    ],
)
def test_a_3d_layout_that_cannot_be_laid_out_is_a_one_line_error(tmp_path, kwargs, message):
    args = {"pp": PP, "tp": TP, "micro": MICRO_3D, **kwargs}
    plant = args.pop("plant", None)
    with pytest.raises(ValueError, match=message) as err:
        write_run(tmp_path / "run", RANKS_3D, 2, plant, layout="3d", **args)
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="a heavy_stage plant needs the 3d layout"):
        write_run(tmp_path / "run", 16, 2, "heavy_stage")
