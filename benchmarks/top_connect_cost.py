"""What a frame of `scalescope top --connect` costs at 1,024 ranks: CPU seconds per frame.

A TCPStore in this process holds 1,024 ranks' live states (256 bytes each, sealed for the
job, as the relays publish them), the job's id, their hosts (16 nodes) and the world size; the
view (which learns the job's id there at each frame) then draws ``--frames`` frames into a
string, and the median CPU time (user + system of this process, the store's
server thread included) per frame is printed against the target of 0.5 s.

    .venv/bin/python benchmarks/top_connect_cost.py --ranks 1024 --frames 7
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from rich.console import Console

from results import record

TARGET_S = 0.5


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=1024)
    p.add_argument("--frames", type=int, default=7)
    return p.parse_args()


def published(ranks: int, folder: Path) -> list[bytes]:
    """Each rank's state file as a rank that is 7 steps in, in an all_reduce, would hold."""
    from scalescope.events.live_state_writer import LiveStateWriter

    raws = []
    now = time.perf_counter_ns()
    for rank in range(ranks):
        path = folder / f"rank-{rank}.state"
        writer = LiveStateWriter(path, 1000 + rank, time.time_ns() - now)
        writer.step(7, now - 5_000_000)
        writer.phase("backward", now - 3_000_000)
        writer.enter("all_reduce", "0", 41 + (rank == 77), 9_488, now - 1_000_000)
        raws.append(path.read_bytes())
        writer.close()
    return raws


def main() -> None:
    args = parse()
    from torch.distributed import TCPStore

    from scalescope.launch.channel.seals import new_job_id
    from scalescope.launch.channel.store import Channel
    from scalescope.live.store_view import StoreTop

    server = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                      timeout=timedelta(seconds=30))  # fmt: skip
    key = secrets.token_bytes(32)
    channel = Channel(server, key=key, job=new_job_id())
    channel.put_job()
    with tempfile.TemporaryDirectory() as tmp:
        for rank, raw in enumerate(published(args.ranks, Path(tmp))):
            channel.publish(rank, raw)
            channel.put_host(rank, f"node{rank // 64:02d}")
    channel.put_world(args.ranks)
    client = Channel(TCPStore("127.0.0.1", server.port, is_master=False,
                              timeout=timedelta(seconds=30)), key=key)  # fmt: skip
    view = StoreTop(client)
    console = Console(file=open("/dev/null", "w"), width=160)  # noqa: SIM115
    cpu = []
    for _ in range(args.frames):
        start = time.process_time()
        console.print(view.frame())
        cpu.append(time.process_time() - start)
    first, rest = cpu[0], statistics.median(cpu[1:]) if len(cpu) > 1 else cpu[0]
    print(f"top --connect, {args.ranks} ranks: first frame {first:.3f} s CPU, then median "
          f"{rest:.3f} s CPU per frame (target <= {TARGET_S} s)")  # fmt: skip
    record("top --connect frame CPU", rest, "s", f"<= {TARGET_S}", rest <= TARGET_S,
           f"{args.ranks} ranks, first frame {first:.3f} s")  # fmt: skip


if __name__ == "__main__":
    main()
