"""The what-if's promised gain against a re-run without the cause, by the script's own clock.

Each scenario plants a cause in a real 2-rank run of tests/e2e/scripts/ddp_train.py (rank 1
sleeps ``--sleep-ms`` in forward or in data, every step or from mid-run on) and runs the same
script again without it, interleaved (planted, clean, clean, planted, ...), ``--repeats``
pairs. Per pair:

  predicted gain = the what-if's gain of ``rank:1`` on the planted run (its replay as
                   measured minus the replay with rank 1 fixed);
  measured gain  = the planted run's median step minus the clean run's, rank 0's steps by
                   the script's own clock (``--step-log``), measured steps only.

Printed side by side per pair and as medians, with the median of the pairs' ratios; target:
within 15 % of the measured gain (0.85-1.15).

Two causes at once (``--two``, 3 ranks on 2 cores): rank 1 sleeps ``--sleep-ms`` and rank 2
half of it, both in forward; each triple runs both, rank 2's sleep alone, and neither. The
gain of ``rank:1+rank:2`` is checked against both-minus-neither (target within 20 %), and the
gain of ``rank:1`` alone against both-minus-rank-2-alone: fixing one gains only down to the
other, not its own sleep.

Rank 0 evaluating 100 batches every 5 steps of tests/e2e/scripts/gpt_train.py (``--no-eval``
skips it): the gain of ``eval`` against the same script without evaluation, rank 0's mean
step by its own clock (a cost every k steps is in the mean, not the median).

A slow link (``--no-link`` skips it): three hosts (network namespaces on one bridge, each its
own host name), one rank each, tests/e2e/scripts/pairs_train.py all-reducing ``--link-mbytes``
on each pair group, blocking; the path between host0 and host1 throttled with tc (htb,
``--link-rate``) in the planted run and not in the clean one. The gain of ``link:host0,host1`` (its
groups at the pace of the other pairs) against the clean run's step by rank 0's own clock.
The gradients' all-reduce over all three ranks crosses the link too, which ``link:`` does
not see (a collective over all ranks crosses every link: ``comm:X``); ``--link-hidden`` keeps
it small (a 32-wide model: 4 KB), as it is beside tensor-parallel pairs' activations. With
256 (256 KB of gradients) one pair gave 47.0 ms predicted against 60.8 measured (0.773):
the 14 ms between them is that all-reduce over the throttled path. Three ranks share two
cores here, and while the throttled pair waits the other pairs transfer faster than in the
clean run: the pace the fix takes from them is 10-12 ms a step too quick whatever the rate
(100 mbit/s: 50.9 ms predicted against 38.7, 1.323; 30 mbit/s: 147.0 against 136.4, 1.078).
Needs root, iproute2 and tc: where they are missing it says SKIP with the reason.

    .venv/bin/python benchmarks/accuracy/whatif.py --repeats 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1]
if str(BENCHMARKS) not in sys.path:  # run standalone: results.py beside run_all.py
    sys.path.insert(0, str(BENCHMARKS))

from results import record, skipped  # noqa: E402

TESTS = BENCHMARKS.parent / "tests"
if str(TESTS / "helpers") not in sys.path:
    sys.path.insert(0, str(TESTS / "helpers"))
from netns_hosts import (  # noqa: E402
    bridged_hosts,
    etc_hosts_file,
    netns_unavailable,
    on_host,
    throttle_pair,
)

from scalescope.analyze.model.whatif import what_if  # noqa: E402
from scalescope.events import load_run  # noqa: E402

DDP_TRAIN = BENCHMARKS.parent / "tests" / "e2e" / "scripts" / "ddp_train.py"
GPT_TRAIN = BENCHMARKS.parent / "tests" / "e2e" / "scripts" / "gpt_train.py"
EVAL_ARGS = ("--eval-every", "5", "--eval-iters", "100")
"""Rank 0 evaluates 100 batches every 5 steps (the periodic cause)."""
SCENARIOS = {
    "forward": ("forward", 0),
    "data": ("data", 0),
    "forward-midrun": ("forward", 12),
}
"""name: (where rank 1 sleeps, from which step)."""
PAIRS_TRAIN = BENCHMARKS.parent / "tests" / "e2e" / "scripts" / "pairs_train.py"
LINK_HOSTS = ["host0", "host1", "host2"]


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3, help="pairs per scenario (interleaved)")
    p.add_argument("--scenarios", default=",".join(SCENARIOS))
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup-steps", type=int, default=4)
    p.add_argument("--sleep-ms", type=float, default=40.0)
    p.add_argument("--tolerance", type=float, default=0.15, help="|ratio - 1| at most this")
    p.add_argument("--two-tolerance", type=float, default=0.20)
    p.add_argument("--no-two", dest="two", action="store_false", help="skip two causes")
    p.add_argument("--no-eval", dest="eval", action="store_false", help="skip rank-0 eval")
    p.add_argument("--no-link", dest="link", action="store_false", help="skip the slow link")
    p.add_argument("--link-mbytes", type=float, default=0.5)
    p.add_argument("--link-hidden", type=int, default=32, help="pairs_train's model width")
    p.add_argument("--link-rate", default="30mbit", help="tc's rate on the slow path")
    return p.parse_args()


@dataclass(frozen=True)
class Pair:
    predicted_ms: float
    measured_ms: float
    planted_step_ms: float
    clean_step_ms: float
    predicted_step_ms: float

    @property
    def ratio(self) -> float:
        return self.predicted_ms / self.measured_ms


def run(
    tmp: Path, args: argparse.Namespace, where: str | None, start: int, ranks: int = 2,
    extra: tuple[str, ...] = (),
) -> Path:  # fmt: skip
    tmp.mkdir(parents=True)
    planted = [] if where is None else [
        "--sleep-rank", "1", "--sleep-s", str(args.sleep_ms / 1e3), "--sleep-where", where,
        "--sleep-from", str(start),
    ]  # fmt: skip
    over = ["--oversubscribe"] if ranks > 2 else []
    cmd = [sys.executable, "-m", "scalescope.cli", "run", "-n", str(ranks), *over, "--run-dir",
           "run", "--warmup-steps", str(max(args.warmup_steps, start)), "--no-report",
           str(DDP_TRAIN), "--steps", str(args.steps), "--step-log", "steps.json", *planted,
           *extra]  # fmt: skip
    subprocess.run(cmd, cwd=tmp, check=True, stdout=subprocess.DEVNULL)
    return tmp


def measure_two(tmp: Path, args: argparse.Namespace, i: int) -> tuple[Pair, Pair]:
    """Both causes, rank 2's alone, neither (rotated); the gains of fixing both and rank 1."""
    half = f"2:{args.sleep_ms / 2e3}"
    variants = {
        "both": ("forward", (f"--also-sleep={half}",)),
        "rank2": ("forward", (f"--also-sleep={half}", "--sleep-rank=-1")),
        "none": (None, ()),
    }
    order = list(variants)[i % 3 :] + list(variants)[: i % 3]
    folders = {
        name: run(tmp / f"two-{i}-{name}", args, variants[name][0], 0, 3, variants[name][1])
        for name in order
    }
    recorded = load_run(folders["both"] / "run")
    result = what_if(recorded, recorded.meta.warmup_steps, ["rank:1+rank:2", "rank:1"])
    both, one = result.fixes
    ms = {name: own_step_ms(folder, args.warmup_steps) for name, folder in folders.items()}
    return (
        Pair(
            both.gain_ms, ms["both"] - ms["none"], ms["both"], ms["none"], both.prediction.step_ms
        ),
        Pair(
            one.gain_ms, ms["both"] - ms["rank2"], ms["both"], ms["rank2"], one.prediction.step_ms
        ),
    )


def own_step_ms(folder: Path, first: int) -> float:
    steps = json.loads((folder / "steps.json").read_text())
    return 1e3 * statistics.median(steps[first:])


def measure_pair(tmp: Path, args: argparse.Namespace, name: str, i: int) -> Pair:
    where, start = SCENARIOS[name]
    first = max(args.warmup_steps, start)
    order = [where, None] if i % 2 == 0 else [None, where]
    folders = {w: run(tmp / f"{name}-{i}-{w or 'clean'}", args, w, start) for w in order}
    planted, clean = folders[where], folders[None]
    recorded = load_run(planted / "run")
    result = what_if(recorded, recorded.meta.warmup_steps, ["rank:1"])
    (fix,) = result.fixes
    planted_ms, clean_ms = own_step_ms(planted, first), own_step_ms(clean, first)
    return Pair(fix.gain_ms, planted_ms - clean_ms, planted_ms, clean_ms, fix.prediction.step_ms)


def gpt_run(tmp: Path, args: argparse.Namespace, planted: bool) -> Path:
    tmp.mkdir(parents=True)
    cmd = [sys.executable, "-m", "scalescope.cli", "run", "-n", "2", "--run-dir", "run",
           "--warmup-steps", str(args.warmup_steps), "--no-report", str(GPT_TRAIN), "--steps",
           str(args.steps), "--grad-accum", "2", "--work-log", "work-{rank}.json",
           *(EVAL_ARGS if planted else ())]  # fmt: skip
    subprocess.run(cmd, cwd=tmp, check=True, stdout=subprocess.DEVNULL)
    return tmp


def mean_step_ms(folder: Path, first: int) -> float:
    """Rank 0's mean step by the script's own clock: a cost every k steps is in the mean."""
    steps = json.loads((folder / "work-0.json").read_text())["steps"]
    return 1e3 * statistics.fmean(s["s"] for s in steps if s["step"] >= first)


def rank_0_eval(args: argparse.Namespace) -> int:
    """Rank 0 evaluating every 5 steps against the same script without it; figures outside."""
    pairs = []
    with tempfile.TemporaryDirectory(prefix="whatif-eval-") as tmp:
        for i in range(args.repeats):
            order = [True, False] if i % 2 == 0 else [False, True]
            runs = {p: gpt_run(Path(tmp) / f"eval-{i}-{p}", args, p) for p in order}
            recorded = load_run(runs[True] / "run")
            (fix,) = what_if(recorded, recorded.meta.warmup_steps, ["eval"]).fixes
            planted, clean = (mean_step_ms(runs[p], args.warmup_steps) for p in (True, False))
            pairs.append(Pair(fix.gain_ms, planted - clean, planted, clean, fix.prediction.mean_ms))
            print(f"eval pair {i + 1}: predicted gain {fix.gain_ms:.2f} ms, measured "
                  f"{planted - clean:.2f} ms, ratio {pairs[-1].ratio:.3f}", flush=True)  # fmt: skip
    return judge(
        pairs, args.tolerance, "rank-0 eval",
        "whatif: gain of fixing rank 0's evaluation every 5 steps (gpt_train, 2 ranks), "
        "predicted / measured by a re-run without it (mean steps)",
    )  # fmt: skip


def judge(pairs: list[Pair], tolerance: float, label: str, figure: str) -> int:
    """The medians of ``pairs`` printed and recorded as ``figure``; 1 when outside."""
    ratio = statistics.median(p.ratio for p in pairs)
    predicted = statistics.median(p.predicted_ms for p in pairs)
    measured = statistics.median(p.measured_ms for p in pairs)
    low, high = 1 - tolerance, 1 + tolerance
    met = low <= ratio <= high
    print(f"{label:15s} predicted gain {predicted:7.2f} ms  measured {measured:7.2f} ms  "
          f"ratio {ratio:.3f}  {'pass' if met else 'FAIL'}")  # fmt: skip
    record(
        figure, ratio, "ratio", f"{low:.2f}-{high:.2f}", met,
        f"medians {predicted:.1f} / {measured:.1f} ms, {len(pairs)} interleaved pairs",
    )  # fmt: skip
    return int(not met)


def link_run(tmp: Path, args: argparse.Namespace, planted: bool) -> Path:
    """One run of pairs_train.py on three bridged hosts; host0-host1 throttled if planted."""
    tmp.mkdir(parents=True)
    with bridged_hosts(len(LINK_HOSTS), "10.214.7") as hosts:
        why = throttle_pair(hosts[0], hosts[1], args.link_rate) if planted else None
        if why:
            raise RuntimeError(why)
        etc_hosts = etc_hosts_file(tmp, hosts, LINK_HOSTS)
        endpoint = f"{hosts[0][2]}:{29_400 + (tmp.stat().st_ino % 1000)}"
        procs = []
        for node, (host, name) in enumerate(zip(hosts, LINK_HOSTS, strict=True)):
            argv = [sys.executable, "-m", "scalescope.cli", "run", "--nnodes", "3",
                    "--node-rank", str(node), "-n", "1", "--rdzv-endpoint", endpoint,
                    "--local-addr", host[2], "--run-dir", "run", "--warmup-steps",
                    str(args.warmup_steps), "--no-report", str(PAIRS_TRAIN), "--steps",
                    str(args.steps), "--mbytes", str(args.link_mbytes), "--exchange",
                    "allreduce", "--hidden", str(args.link_hidden), "--step-log", "steps.json",
                    ]  # fmt: skip
            procs.append(subprocess.Popen(on_host(host, name, etc_hosts, argv), cwd=tmp,
                                          stdout=subprocess.DEVNULL))  # fmt: skip
        if any(p.wait(timeout=300) for p in procs):
            raise RuntimeError(f"a node of the link run in {tmp} failed")
    return tmp


def slow_link(args: argparse.Namespace) -> int:
    """The throttled link against the same hosts without it; 0 when within the target."""
    why = netns_unavailable(("ip", "tc", "unshare"))
    if why:
        figure = "whatif: gain of fixing a link throttled with tc (3 hosts, pair groups)"
        tolerance = f"{1 - args.tolerance:.2f}-{1 + args.tolerance:.2f}"
        skipped(figure, "ratio", tolerance, why)
        print(f"slow link: SKIP ({why})")
        return 0
    pairs = []
    with tempfile.TemporaryDirectory(prefix="whatif-link-") as tmp:
        for i in range(args.repeats):
            order = [True, False] if i % 2 == 0 else [False, True]
            runs = {p: link_run(Path(tmp) / f"link-{i}-{p}", args, p) for p in order}
            recorded = load_run(runs[True] / "run")
            cause = f"link:{LINK_HOSTS[0]},{LINK_HOSTS[1]}"
            (fix,) = what_if(recorded, recorded.meta.warmup_steps, [cause]).fixes
            planted, clean = (own_step_ms(runs[p], args.warmup_steps) for p in (True, False))
            pairs.append(Pair(fix.gain_ms, planted - clean, planted, clean, fix.prediction.step_ms))
            print(f"link pair {i + 1}: predicted gain {fix.gain_ms:.2f} ms, measured "
                  f"{planted - clean:.2f} ms (planted {planted:.2f}, clean {clean:.2f}), "
                  f"ratio {pairs[-1].ratio:.3f}", flush=True)  # fmt: skip
    return judge(
        pairs, args.tolerance, "slow link",
        f"whatif: gain of fixing a link throttled with tc to {args.link_rate} (3 hosts in network "
        f"namespaces, {args.link_mbytes:g} MB all-reduced on each pair group, pairs_train), "
        "predicted / measured by a re-run without the throttle",
    )  # fmt: skip


def two_causes(args: argparse.Namespace) -> int:
    """The two-cause triples; the count of figures outside their target."""
    rows: list[tuple[Pair, Pair]] = []
    with tempfile.TemporaryDirectory(prefix="whatif-two-") as tmp:
        for i in range(args.repeats):
            rows.append(measure_two(Path(tmp), args, i))
            for label, p in zip(("rank:1+rank:2", "rank:1 alone"), rows[-1], strict=True):
                gains = f"predicted gain {p.predicted_ms:.2f} ms, measured {p.measured_ms:.2f} ms"
                print(f"two causes {i + 1} {label}: {gains}, ratio {p.ratio:.3f}", flush=True)
    failed = 0
    for j, (label, tolerance) in enumerate(
        (("both fixed (rank:1+rank:2)", args.two_tolerance), ("rank 1 alone fixed", args.tolerance))
    ):
        ps = [r[j] for r in rows]
        ratio = statistics.median(p.ratio for p in ps)
        predicted = statistics.median(p.predicted_ms for p in ps)
        measured = statistics.median(p.measured_ms for p in ps)
        low, high = 1 - tolerance, 1 + tolerance
        met = low <= ratio <= high
        failed += not met
        print(f"two causes, {label:26s} predicted gain {predicted:7.2f} ms  measured "
              f"{measured:7.2f} ms  ratio {ratio:.3f}  {'pass' if met else 'FAIL'}")  # fmt: skip
        record(
            f"whatif: two causes at once (rank 1 sleeps {args.sleep_ms:g} ms, rank 2 half, in "
            f"forward; ddp_train, 3 ranks on 2 cores), gain with {label}, predicted / measured",
            ratio, "ratio", f"{low:.2f}-{high:.2f}", met,
            f"medians {predicted:.1f} / {measured:.1f} ms, {len(ps)} interleaved triples",
        )  # fmt: skip
    return failed


def main() -> None:
    args = parse()
    names = [n.strip() for n in args.scenarios.split(",") if n.strip()]
    low, high = 1 - args.tolerance, 1 + args.tolerance
    target = f"{low:.2f}-{high:.2f}"
    pairs: dict[str, list[Pair]] = {n: [] for n in names}
    with tempfile.TemporaryDirectory(prefix="whatif-") as tmp:
        for i in range(args.repeats):
            for name in names:
                p = measure_pair(Path(tmp), args, name, i)
                pairs[name].append(p)
                print(f"{name} pair {i + 1}: predicted gain {p.predicted_ms:7.2f} ms, measured "
                      f"{p.measured_ms:7.2f} ms (planted {p.planted_step_ms:.2f}, clean "
                      f"{p.clean_step_ms:.2f}, predicted after {p.predicted_step_ms:.2f}), "
                      f"ratio {p.ratio:.3f}", flush=True)  # fmt: skip
    failed = 0
    print(f"\nmedians over {args.repeats} pair(s), target ratio {target}:")
    for name in names:
        ps = pairs[name]
        predicted = statistics.median(p.predicted_ms for p in ps)
        measured = statistics.median(p.measured_ms for p in ps)
        ratio = statistics.median(p.ratio for p in ps)
        met = low <= ratio <= high
        failed += not met
        print(f"{name:15s} predicted gain {predicted:7.2f} ms  measured {measured:7.2f} ms  "
              f"ratio {ratio:.3f}  {'pass' if met else 'FAIL'}")  # fmt: skip
        where, start = SCENARIOS[name]
        record(
            f"whatif: gain of fixing rank 1 sleeping {args.sleep_ms:g} ms in {where} "
            f"{'every step' if start == 0 else f'from step {start}'} (ddp_train, 2 ranks), "
            "predicted / measured by a re-run without it", ratio, "ratio", target, met,
            f"medians {predicted:.1f} / {measured:.1f} ms, {len(ps)} interleaved pairs",
        )  # fmt: skip
    if args.two:
        failed += two_causes(args)
    if args.eval:
        failed += rank_0_eval(args)
    if args.link:
        failed += slow_link(args)
    print(f"\n{'all within their targets' if not failed else f'{failed} figure(s) outside'}")


if __name__ == "__main__":
    main()
