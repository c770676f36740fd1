"""The probe's cost per collective, and its share of an FSDP2 step.

Two ranks (gloo, ``scalescope run --no-probe``) run benchmarks/workers/collective_cost.py,
which installs and removes the probe itself between blocks, interleaved: a block of
``--calls`` 8-byte all_reduces with each way of recording them off, with torch's
process-group hooks (the probe's way), and with the older ``dist.*`` wrappers; then FSDP2
steps (fully_shard on each block and the root) with the probe off and on. It prints the
medians over ``--blocks`` blocks and the difference per call. Target: <= 2 us per call.

    .venv/bin/python benchmarks/collective_cost.py --blocks 21 --calls 500
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from results import record

WORKER = Path(__file__).parent / "workers" / "collective_cost.py"
TARGET_US = 2.0


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--blocks", type=int, default=21, help="interleaved blocks per way")
    p.add_argument("--calls", type=int, default=500, help="all_reduces per block")
    p.add_argument("--fsdp-steps", type=int, default=10, help="FSDP2 steps per block")
    p.add_argument("--fsdp-blocks", type=int, default=9, help="interleaved FSDP2 blocks per way")
    return p.parse_args()


def main() -> None:
    args = parse()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cost.json"
        cmd = [
            sys.executable, "-m", "scalescope.cli", "run", "-n", "2", "--no-probe", "--no-report",
            "--run-dir", str(Path(tmp) / "run"), str(WORKER), "--out", str(out),
            "--blocks", str(args.blocks), "--calls", str(args.calls),
            "--fsdp-steps", str(args.fsdp_steps), "--fsdp-blocks", str(args.fsdp_blocks),
        ]  # fmt: skip
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        res = json.loads(out.read_text())
    off = res["all_reduce_us"]["off"]
    print(f"8-byte all_reduce, 2 ranks, gloo: median of {args.blocks} blocks of {args.calls} calls")
    for way, us in res["all_reduce_us"].items():
        print(f"  {way:<10} {us:8.2f} us/call   {us - off:+6.2f} us")
    hooks = res["all_reduce_us"]["hooks"] - off
    record(
        "probe's cost per 8-byte all_reduce (group hooks)", hooks, "us", f"<= {TARGET_US}",
        hooks <= TARGET_US, f"wrappers: {res['all_reduce_us']['wrappers'] - off:+.2f} us",
    )  # fmt: skip
    fsdp = res["fsdp_step_ms"]
    share = (fsdp["on"] - fsdp["off"]) / fsdp["on"] * 100
    calls = res["fsdp_collectives_per_step"]
    print(
        f"FSDP2 step (2 ranks, {calls} collectives/step): {fsdp['off']:.2f} ms off, "
        f"{fsdp['on']:.2f} ms with the probe: {share:+.1f} % of the step "
        f"(cost per call x calls: {hooks * calls / 1000 / fsdp['on'] * 100:.2f} %)"
    )
    record("probe's share of an FSDP2 step (2 ranks)", share, "%", "", None)


if __name__ == "__main__":
    main()
