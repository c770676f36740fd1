"""How each rank of a run ended, from its own file and the launcher's word."""

from __future__ import annotations

from dataclasses import dataclass

from scalescope.events import Run

FAILED_STATUSES = ("failed", "killed", "interrupted")
PEER_FAILURE_MARKERS = ("Connection closed by peer", "Connection reset by peer", "remote worker")
"""Errors gloo/NCCL raise in the ranks that survive another rank's death."""


@dataclass(frozen=True)
class RankStatus:
    """How one rank ended; status ``unknown`` when neither it nor the launcher said."""

    rank: int
    hostname: str
    status: str
    exit_code: int | None
    error: str | None
    """Last lines of its traceback or the signal that ended it."""
    steps: int | None
    """Steps the rank reported finishing; None when unknown."""
    end_time: float | None = None
    """Unix seconds when the rank ended (or the launcher saw it fail)."""

    @property
    def failed_because_of_peer(self) -> bool:
        """The error only says another rank went away: a consequence, not a cause."""
        return any(marker in (self.error or "") for marker in PEER_FAILURE_MARKERS)


def rank_status(run: Run, rank: int) -> RankStatus:
    """The most final word on a rank: a finished status beats ``running``.

    A rank killed hard cannot update its own file (``ranks/rank-N.json``), so the
    launcher's entry in run.json may know more; either may be missing. Exit code and
    error are taken from whichever source has them.
    """
    candidates = [m for m in (run.ranks.get(rank), run.meta.ranks.get(str(rank))) if m]
    if not candidates:
        return RankStatus(rank, "", "unknown", None, None, None)
    final = [m for m in candidates if m.status != "running"]
    best = (final or candidates)[0]
    ordered = [best, *candidates]
    return RankStatus(
        rank=rank,
        hostname=next((m.hostname for m in ordered if m.hostname), ""),
        status=best.status,
        exit_code=next((m.exit_code for m in ordered if m.exit_code is not None), None),
        error=next((m.error for m in ordered if m.error), None),
        steps=best.steps,
        end_time=next((m.end_time for m in ordered if m.end_time), None),
    )


def hostnames(run: Run, ranks: tuple[RankStatus, ...]) -> tuple[str, ...]:
    if run.meta.hostnames:
        return tuple(run.meta.hostnames)
    return tuple(sorted({r.hostname for r in ranks if r.hostname}))
