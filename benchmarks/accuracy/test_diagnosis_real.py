"""Each bottleneck made for real on this machine, run through the CLI, and named first by the
diagnosis with its share of step time within ``TOLERANCE`` points of an independent truth.

Truths: the input-bound share is the workload's own timing of each step outside forward,
backward and optimizer (the wait for its next batch) over its step time, taken in the run
itself (bench.json: a loader timed again in this process ran at another speed on this
shared VM, 38% of a step against the run's 26% once); the compute share is the workload's own timing
of forward + backward + optimizer over its step time (bench.json); the cost of
oversubscription or of a straggler is the step time lost against a well-placed reference
run of the same workload (bench.json of both); the communication share is the step time
lost when the link between two network namespaces is throttled, against the same run over
the unthrottled link.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from machine import usable_cores
from real_runs import (
    CLI,
    RATE,
    RESNET18_ARGS,
    RealRun,
    bench_in_both,
    bench_step_ms,
    bench_wait_ms,
    compute_efficiency,
    diagnose_dir,
    noise_images,
    real_run,
    speed_gap,
    throttle,
    unequal_cores,
    warnings,
)

from conftest import cli_env, figure, netns_unavailable, veth_hosts
from scalescope.diagnose.findings import NO_CLEAR_BOTTLENECK
from scalescope.events import load_run

TOLERANCE = 10.0
"""Points of step-time share the reported cost may differ from the truth."""

pytestmark = pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 2, reason="the scenarios need two cpus (one per rank)"
)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> RealRun:
    """The balanced, well-configured run: also the reference for placement and straggler."""
    run = real_run(RESNET18_ARGS, tmp_path_factory.mktemp("reference"), speed=True)
    placed = load_run(run.run_dir).ranks
    if [placed[r].cpus for r in (0, 1)] != [[0], [1]]:
        pytest.skip(f"ranks were not bound to cpus 0 and 1: {[placed[r].cpus for r in placed]}")
    return run


def lost_share(slow: RealRun, reference: RealRun) -> float:
    """Truth of what a bottleneck costs: the step time lost against the reference, in %."""
    return 100.0 * (slow.step_ms - reference.step_ms) / slow.step_ms


def test_balanced_run_raises_no_false_alarm(reference, tmp_path):
    """Balanced means cpus 0 and 1 equally fast during the run: on this VM one is at times
    20-50% slower (its speedometer), and a rank bound to it is then a real straggler."""
    run = reference
    if unequal_cores(reference):
        run = real_run(RESNET18_ARGS, tmp_path, premise=unequal_cores)
    d = run.diagnosis
    assert warnings(d) == [], [(f.code, f.summary) for f in d.findings]
    assert d.verdict.startswith(NO_CLEAR_BOTTLENECK)
    assert all(f.code == "COMPUTE" for f in d.findings), "only the compute-bound info"


def test_input_bound_jpeg_folder_with_no_workers(tmp_path):
    data = noise_images(tmp_path / "images", 64, 1024, 768)
    run = real_run(
        [
            "bench",
            "resnet18",
            "-n",
            "2",
            "--data",
            str(data),
            "--workers",
            "0",
            "--image-size",
            "64",
            "--batch-size",
            "8",
            "--steps",
            "8",
            "--warmup-steps",
            "2",
        ],
        tmp_path,
    )
    first, truth = first_and_truth(run, bench_wait_ms(run.run_dir), "input-bound")
    figure("input-bound share of step time", first.share_pct, truth, TOLERANCE)
    assert first.code == "INPUT_BOUND"
    assert abs(first.share_pct - truth) <= TOLERANCE
    assert any("--workers" in r for r in first.remedies)


def test_oversubscribed_threads_named_first(reference, tmp_path):
    """Named first with the default thresholds. Its cost is estimated against a run that
    computes at ``flops_expected_fraction`` of the estimated peak; this VM's peak comes from
    its nominal clock, so the share is checked as a user gets it with ``--baseline``: the
    fraction the well-placed reference reached becomes the expected one."""
    threads = str(usable_cores())  # 2 ranks of as many threads as cores: twice the cores
    run = real_run([*RESNET18_ARGS, "--no-bind", "--oversubscribe", "--threads-per-rank", threads],
                   tmp_path)  # fmt: skip
    first, truth = run.diagnosis.findings[0], lost_share(run, reference)
    assert first.code == "OVERSUBSCRIBED" and first.bottleneck == "CPU placement"
    assert "--threads-per-rank 1" in first.remedies[0]
    out = tmp_path / "calibrated.json"
    args = ["report", str(run.run_dir), "--baseline", str(reference.run_dir), "--json", str(out)]
    report = subprocess.run(
        [*CLI, *args], env=cli_env(), capture_output=True, text=True, timeout=120
    )
    assert report.returncode == 0, report.stderr
    achieved = compute_efficiency(reference.run_dir)
    assert f"expected FLOP/s: {100 * achieved:.0f}% of the estimated peak" in report.stderr
    calibrated = json.loads(out.read_text())["diagnosis"]["findings"][0]
    assert calibrated["code"] == "OVERSUBSCRIBED"
    share = calibrated["share_pct"]
    print(f"oversubscribed: reported {first.share_pct:.1f}% (default), {share:.1f}% "
          f"(--baseline: {100 * achieved:.0f}% of peak), truth {truth:.1f}% "
          f"({run.step_ms:.0f} vs {reference.step_ms:.0f} ms)")  # fmt: skip
    figure("oversubscribed cost (--baseline)", share, truth, TOLERANCE)
    assert abs(share - truth) <= TOLERANCE


def test_straggler_on_a_shared_core_is_rank_1(tmp_path):
    """The truth is the step time lost against a reference run recorded right after the
    straggler's, whose cpu 0 (rank 0's, which the busy loop leaves alone) ran at the same
    speed. The module's reference, recorded minutes earlier, drifted from it: CI once compared
    a run with a reference the VM had run 25% slower (13 points off), and a local run with
    one of 1,778 ms against the usual 1,300-1,500 while the speedometers saw no gap (15
    points off)."""
    run = real_run(RESNET18_ARGS, tmp_path / "slow", busy_cpu=1, speed=[0])
    reference = real_run(
        RESNET18_ARGS, tmp_path / "reference", premise=lambda r: speed_gap(run, r, 0)
    )
    first, truth = run.diagnosis.findings[0], lost_share(run, reference)
    print(
        f"straggler: reported {first.share_pct:.1f}%, truth {truth:.1f}% "
        f"({run.step_ms:.0f} vs {reference.step_ms:.0f} ms)"
    )
    figure("straggler on a shared core, cost", first.share_pct, truth, TOLERANCE)
    assert (first.code, first.rank) == ("STRAGGLER", 1)
    assert abs(first.share_pct - truth) <= TOLERANCE
    assert first.remedies[0].startswith("rank 1's threads were preempted"), first.remedies
    assert "(cpus 1 on " in first.remedies[0]


def test_compute_bound_resnet50_comes_first(tmp_path):
    """Truth: the workload's own timing of forward + backward + optimizer in each step
    (bench.json ``compute_times_s``), taken in the run itself; a step timed again in this
    process ran at another speed on this shared VM (81% against 98% once)."""
    run = real_run(
        [
            "bench",
            "resnet50",
            "-n",
            "1",
            "--batch-size",
            "16",
            "--image-size",
            "96",
            "--steps",
            "6",
            "--warmup-steps",
            "2",
        ],
        tmp_path,
    )
    truth_ms = bench_step_ms(run.run_dir, "compute_times_s")
    first, truth = first_and_truth(run, truth_ms, "compute-bound")
    figure("compute-bound share (resnet50)", first.share_pct, min(truth, 100.0), TOLERANCE)
    assert first.code == "COMPUTE", [(f.code, f.summary) for f in run.diagnosis.findings]
    assert abs(first.share_pct - min(truth, 100.0)) <= TOLERANCE
    assert any(e.name.startswith("estimated fp32 peak") for e in first.evidence)


# --- communication over a throttled link between two network namespaces ------------------


def first_and_truth(run, truth_ms: float, label: str):
    """The first finding and the true share (%) of ``truth_ms`` in the step, printed together."""
    first = run.diagnosis.findings[0]
    truth = 100.0 * truth_ms / run.step_ms
    print(
        f"{label}: reported {first.share_pct:.1f}%, truth {truth:.1f}% "
        f"({truth_ms:.0f} of {run.step_ms:.0f} ms)"
    )
    return first, truth


@pytest.fixture
def linked_hosts():
    """Two namespaces joined by a veth pair (not yet throttled)."""
    reason = netns_unavailable(("ip", "tc"))
    if reason:
        pytest.skip(reason)
    with veth_hosts("10.211.8", "sd") as hosts:
        yield hosts


def test_communication_bound_over_a_throttled_link(linked_hosts, tmp_path):
    """Truth: the step time lost when the same link is throttled, against the same run
    over the unthrottled veth pair (a plain all_reduce of the gradient bytes timed alone
    would also count the part DDP hides under backward)."""
    fast_ms = bench_in_both(linked_hosts, tmp_path / "fast")
    reason = throttle(linked_hosts)
    if reason:
        pytest.skip(reason)
    step_ms = bench_in_both(linked_hosts, tmp_path / "run")
    d = diagnose_dir(tmp_path / "run")
    first, truth = d.findings[0], 100.0 * (step_ms - fast_ms) / step_ms
    print(
        f"communication: reported {first.share_pct:.1f}%, truth {truth:.1f}% "
        f"({step_ms:.0f} ms per step at {RATE}, {fast_ms:.0f} ms unthrottled)"
    )
    figure(f"communication-bound share ({RATE} link)", first.share_pct, truth, TOLERANCE)
    assert first.code == "COMM_BANDWIDTH", [(f.code, f.summary) for f in d.findings]
    assert abs(first.share_pct - truth) <= TOLERANCE
    assert "bf16_compress_hook" in first.remedies[0]
