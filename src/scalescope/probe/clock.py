"""Clock offsets between ranks, estimated NTP-style when the process group starts and ends.

Every rank records events on its own ``time.perf_counter_ns()`` clock. To put all ranks on
one time base, each rank r exchanges a few timestamps with rank 0 (send/recv on the default
group, gloo only): r sends t1, rank 0 answers with its time t2, r receives at t3. Then
``offset = t2 - (t1 + t3) / 2`` maps r's clock to rank 0's within ``(t3 - t1) / 2``; the
round with the shortest round trip is kept. The exchange uses torch.distributed's own
(unwrapped) point-to-point calls, so it is not recorded as a collective.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
import torch.distributed.distributed_c10d as c10d

from scalescope.probe.context import PROBE_TAG, tagged

ROUNDS = 8
TAG = 0x5CA1E


@dataclass(frozen=True)
class ClockSample:
    when: str
    """start (after init_process_group) or end (before destroy_process_group)."""
    offset_ns: int
    """Add to this rank's perf_counter_ns times to get rank 0's clock."""
    uncertainty_ns: int
    """Half the shortest round trip: the true offset lies within offset ± this."""
    rounds: int


def can_sync() -> bool:
    return c10d.is_initialized() and c10d.get_world_size() > 1 and c10d.get_backend() == "gloo"


def _serve(peer: int, rounds: int) -> None:
    buf = torch.zeros(1, dtype=torch.int64)
    for _ in range(rounds):
        c10d.recv(buf, src=peer, tag=TAG)
        buf[0] = time.perf_counter_ns()
        c10d.send(buf, dst=peer, tag=TAG)


def _ask(rounds: int) -> tuple[int, int]:
    """Rounds with rank 0; (offset, uncertainty) of the round with the shortest round trip."""
    buf = torch.zeros(1, dtype=torch.int64)
    best: tuple[int, int] | None = None
    for _ in range(rounds):
        t1 = time.perf_counter_ns()
        buf[0] = t1
        c10d.send(buf, dst=0, tag=TAG)
        c10d.recv(buf, src=0, tag=TAG)
        t3 = time.perf_counter_ns()
        rtt = t3 - t1
        if best is None or rtt < best[1]:
            best = (int(buf[0]) - (t1 + t3) // 2, rtt)
    assert best is not None
    return best[0], best[1] // 2


def sync_clock(when: str, rounds: int = ROUNDS) -> ClockSample | None:
    """Run the exchange on every rank (a collective step); None where it cannot run."""
    if not can_sync():
        return None
    rank, world = c10d.get_rank(), c10d.get_world_size()
    if rank == 0:
        for peer in range(1, world):
            _serve(peer, rounds)
        return ClockSample(when, 0, 0, rounds)
    offset, uncertainty = _ask(rounds)
    return ClockSample(when, offset, uncertainty, rounds)


class ClockHooks:
    """Wrap init/destroy_process_group in torch.distributed to sync clocks around a run."""

    def __init__(self) -> None:
        self.samples: list[ClockSample] = []
        self.errors: list[str] = []
        self._saved: dict[str, object] = {}

    def install(self) -> None:
        import torch.distributed as dist

        self._saved = {
            "init_process_group": dist.init_process_group,
            "destroy_process_group": dist.destroy_process_group,
        }
        init, destroy = self._saved.values()

        def init_process_group(*args: object, **kwargs: object) -> object:
            result = init(*args, **kwargs)
            self._sync("start")
            return result

        def destroy_process_group(group: object = None) -> object:
            if group is None:
                self._sync("end")
            return destroy(group)

        dist.init_process_group = init_process_group
        dist.destroy_process_group = destroy_process_group

    def uninstall(self) -> None:
        import torch.distributed as dist

        for name, value in self._saved.items():
            setattr(dist, name, value)
        self._saved = {}

    def _sync(self, when: str) -> None:
        try:
            with tagged(PROBE_TAG):
                sample = sync_clock(when)
        except Exception as exc:  # never break training because alignment failed
            self.errors.append(f"clock sync at {when} failed: {exc}")
            return
        if sample is not None:
            self.samples.append(sample)
