"""scalescope's ingest + analyze_run against Holistic Trace Analysis on the same traces.

1. Traces: a real 2-rank gloo DDP run under torch.profiler (CPU, record_shapes) writes one
   trace per rank; its profiled steps are then repeated (times shifted, ``ProfilerStep#N``
   and ids renumbered) until the directory holds ``--size-mb`` megabytes.
2. Each side runs in a fresh subprocess; its peak RSS is read back with
   ``resource.getrusage(RUSAGE_CHILDREN)`` by a wrapper process of its own:
   - scalescope: ``scalescope.ingest.ingest(dir)`` then ``analyze_run``;
   - HTA: ``TraceAnalysis(trace_dir=dir)`` then ``get_temporal_breakdown()``, when ``hta``
     is importable (the ``holistictraceanalysis`` package); else how to install it is
     printed and that side is skipped. Nothing is installed here.

    python benchmarks/ingest_vs_hta.py --size-mb 50          # quick
    python benchmarks/ingest_vs_hta.py                       # 1000 MB, the target size
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgspec

from results import record, skipped

TRAIN = """
import sys, torch, torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
layers = []
for _ in range(8):
    layers += [nn.Linear(128, 128), nn.LayerNorm(128), nn.ReLU()]
ddp = DDP(nn.Sequential(*layers, nn.Linear(128, 10)), bucket_cap_mb=0.1)
opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
handler = tensorboard_trace_handler(sys.argv[1], worker_name=f"rank{rank}")
plan = schedule(wait=1, warmup=1, active=int(sys.argv[2]), repeat=1)
with profile(activities=[ProfilerActivity.CPU], schedule=plan, record_shapes=True,
             on_trace_ready=handler) as prof:
    for _ in range(int(sys.argv[2]) + 2):
        x, y = torch.randn(32, 128), torch.randint(0, 10, (32,))
        opt.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()
        prof.step()
dist.destroy_process_group()
"""

SCALESCOPE_WORKER = """
import sys, time
t0 = time.perf_counter()
from scalescope.diagnose.recording import Recording
from scalescope.ingest import ingest
result = ingest(sys.argv[1])
analysis = Recording.of(result.run).analysis
analysis.reported()
print("RESULT", time.perf_counter() - t0, len(result.run.events), len(result.problems))
"""

HTA_WORKER = """
import sys, time
t0 = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
analyzer = TraceAnalysis(trace_dir=sys.argv[1])
t1 = time.perf_counter()
try:
    analyzer.get_temporal_breakdown(visualize=False)
    note = "ok"
except Exception as exc:  # CPU-only traces have no GPU kernels to break down
    note = f"breakdown failed: {type(exc).__name__}: {exc}"[:200]
print("RESULT", time.perf_counter() - t0, t1 - t0, repr(note))
"""

MEASURE = """
import resource, subprocess, sys
proc = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(proc.stdout)
print(proc.stderr[-2000:], file=sys.stderr)
print("MAXRSS_KB", resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, proc.returncode)
"""


def record_traces(out: Path, active_steps: int) -> None:
    """A real 2-rank gloo DDP run under torch.profiler: one trace file per rank."""
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "train.py"
        script.write_text(TRAIN)
        env = dict(os.environ, OMP_NUM_THREADS="1")
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
        cmd += ["--nproc-per-node", "2", str(script), str(out), str(active_steps)]
        subprocess.run(cmd, env=env, check=True, capture_output=True)


def _shifted(event: dict, k: int, period: float, nsteps: int, id_step: int) -> dict:
    copy = dict(event)
    copy["ts"] = event["ts"] + k * period
    if event["name"].startswith("ProfilerStep#"):
        copy["name"] = f"ProfilerStep#{int(event['name'].split('#')[1]) + k * nsteps}"
    args = event.get("args")
    if isinstance(args, dict) and "External id" in args:
        copy["args"] = dict(args, **{"External id": args["External id"] + k * id_step})
    if "id" in event and isinstance(event["id"], int):
        copy["id"] = event["id"] + k * 10_000_000
    return copy


def grow_trace(src: Path, dst: Path, target_bytes: int) -> int:
    """Repeat the profiled steps of one real trace until the file has ``target_bytes``."""
    doc = json.loads(src.read_text())
    events = doc.pop("traceEvents")
    doc.pop("traceName", None)
    steps = [e for e in events if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#")]
    t0, t1 = min(e["ts"] for e in steps), max(e["ts"] + e["dur"] for e in steps)
    window = [e for e in events if e.get("ph") in ("X", "s", "f") and t0 <= e["ts"] < t1]
    meta = [e for e in events if e.get("ph") == "M"]
    id_step = 1 + max((e.get("args", {}).get("External id", 0) for e in events), default=0)
    encode = msgspec.json.Encoder().encode
    head = json.dumps(doc)[:-1].encode() + b', "traceEvents": [\n'
    with open(dst, "wb") as f:
        f.write(head + b",\n".join(encode(e) for e in meta))
        size, k = f.tell(), 0
        while size < target_bytes:
            block = [encode(_shifted(e, k, t1 - t0 + 100.0, len(steps), id_step)) for e in window]
            data = b",\n" + b",\n".join(block)
            f.write(data)
            size, k = size + len(data), k + 1
        f.write(b'\n], "traceName": "' + str(dst).encode() + b'"}\n')
    return k * len(steps)


def make_traces(out: Path, size_mb: float) -> int:
    raw = out.parent / f"{out.name}-raw"
    shutil.rmtree(raw, ignore_errors=True)
    record_traces(raw, active_steps=10)
    out.mkdir(parents=True, exist_ok=True)
    files = sorted(raw.glob("rank*.json"))
    steps = [grow_trace(f, out / f.name, int(size_mb * 1e6 / len(files))) for f in files]
    shutil.rmtree(raw)
    return steps[0]


def measure(worker: str, trace_dir: Path) -> dict:
    """Run one side in a fresh process under a wrapper that reads its peak RSS."""
    cmd = [sys.executable, "-c", MEASURE, sys.executable, "-c", worker, str(trace_dir)]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    lines = proc.stdout.splitlines()
    result = next((ln.split()[1:] for ln in lines if ln.startswith("RESULT")), None)
    maxrss = next(ln.split()[1:] for ln in lines if ln.startswith("MAXRSS_KB"))
    if result is None or maxrss[1] != "0":
        return {"error": proc.stderr.strip().splitlines()[-1:] or ["no output"], "wall_s": wall}
    return {"seconds": float(result[0]), "peak_mb": int(maxrss[0]) / 1024, "extra": result[1:]}


def hta_available() -> bool:
    probe = subprocess.run([sys.executable, "-c", "import hta.trace_analysis"], capture_output=True)
    return probe.returncode == 0


def report(size_mb: float, ours: dict, hta: dict | None) -> None:
    print(f"\ntrace directory: {size_mb:.1f} MB (2 ranks)")
    print(f"{'':12}{'time s':>10}{'MB/s':>10}{'peak RSS MB':>14}{'peak/size':>11}")
    rows = [("scalescope", ours)] + ([("HTA", hta)] if hta else [])
    for name, r in rows:
        if "error" in r:
            print(f"{name:12}failed: {r['error']}")
            continue
        rate, ratio = size_mb / r["seconds"], r["peak_mb"] / size_mb
        print(f"{name:12}{r['seconds']:10.2f}{rate:10.1f}{r['peak_mb']:14.1f}{ratio:11.2f}")
    if hta and "error" not in hta and "error" not in ours:
        load_s, note = float(hta["extra"][0]), " ".join(hta["extra"][1:])
        print(f"HTA load only: {load_s:.2f} s; breakdown: {note}")
        print(f"time ratio scalescope/HTA: {ours['seconds'] / hta['seconds']:.3f} (target <= 0.1)")
        print(f"memory ratio scalescope/HTA: {ours['peak_mb'] / hta['peak_mb']:.3f}")
    record_figures(size_mb, ours, hta)


def record_figures(size_mb: float, ours: dict, hta: dict | None) -> None:
    figure = f"ingest + analyze time, scalescope / HTA, {size_mb:.0f} MB of traces"
    if "error" in ours:
        skipped(figure, "ratio", "<= 0.1", f"scalescope failed: {ours['error']}")
        return
    record(
        f"ingest + analyze_run of {size_mb:.0f} MB of traces (2 ranks)", ours["seconds"], "s",
        "", None, f"peak RSS {ours['peak_mb']:.0f} MB",
    )  # fmt: skip
    if hta is None or "error" in hta:
        why = "hta is not importable" if hta is None else f"HTA failed: {hta['error']}"
        skipped(figure, "ratio", "<= 0.1", why)
        return
    ratio = ours["seconds"] / hta["seconds"]
    record(
        figure, ratio, "ratio", "<= 0.1", ratio <= 0.1,
        f"{ours['seconds']:.2f} s vs {hta['seconds']:.2f} s; memory ratio "
        f"{ours['peak_mb'] / hta['peak_mb']:.3f}",
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=1000.0)
    parser.add_argument("--dir", type=Path, default=None, help="keep the traces here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trace_dir = args.dir or Path(tmp) / "traces"
        steps = make_traces(trace_dir, args.size_mb)
        size_mb = sum(f.stat().st_size for f in trace_dir.iterdir()) / 1e6
        print(f"made {size_mb:.1f} MB of traces ({steps} profiled steps per rank) in {trace_dir}")
        ours = measure(SCALESCOPE_WORKER, trace_dir)
        hta = None
        if hta_available():
            hta = measure(HTA_WORKER, trace_dir)
        else:
            print(
                "HTA side skipped: `hta` is not importable. Install the benchmark extra: "
                "pip install holistictraceanalysis  (or pip install -e '.[bench]')"
            )
        report(size_mb, ours, hta)


if __name__ == "__main__":
    main()
