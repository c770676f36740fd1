"""Batches copied to the device from pageable memory (the ``to_device`` phase)."""

from __future__ import annotations

from scalescope.analyze.steps.batch_copies import RankCopies
from scalescope.diagnose.findings import (
    Evidence,
    Finding,
    bottleneck,
    remedy,
    summary,
)
from scalescope.diagnose.rules_input import DiagnosisInput, mean_step, rank_times, share_pct
from scalescope.events.units import fmt_bytes_decimal


def _mean(copies: tuple[RankCopies, ...], field: str) -> float:
    return sum(getattr(c, field) for c in copies) / len(copies)


class PageableCopyRule:
    """The step copies its batch from pageable memory for ``copy_share_pct`` or more of its
    time. From pageable memory the driver stages the copy through a pinned buffer and the
    host waits for it and for the stream; pinned memory with ``non_blocking=True`` lets the
    host queue the forward meanwhile.

    Saving: the copies' time per step, an upper bound (a pinned copy still takes the link's
    time on the stream); the what-if replays the steps without them."""

    name = "copies to the device"

    def not_judged(self, ctx: DiagnosisInput) -> tuple[str, ...]:
        return ()

    def evaluate(self, ctx: DiagnosisInput) -> Finding | None:
        copies = tuple(c for c in ctx.analysis.copies if c.pageable_nbytes_per_step > 0)
        step_ms = mean_step(rank_times(ctx.analysis))
        if not copies or not step_ms:
            return None
        ms, nbytes = _mean(copies, "ms_per_step"), _mean(copies, "nbytes_per_step")
        share = share_pct(ms, step_ms)
        if share < ctx.thresholds.copy_share_pct:
            return None
        rate = f"{nbytes / ms / 1e6:.1f} GB/s" if ms > 0 else "an unknown rate"
        pageable = _mean(copies, "pageable_nbytes_per_step")
        return Finding(
            code="PAGEABLE_COPY",
            bottleneck=bottleneck("PAGEABLE_COPY"),
            summary=summary(
                "PAGEABLE_COPY", ms=ms, share=share, size=fmt_bytes_decimal(nbytes), rate=rate
            ),
            share_pct=share,
            saved_ms_per_step=ms,
            evidence=(
                Evidence(
                    "copies to the device",
                    round(share, 1),
                    "% of step time",
                    ctx.thresholds.copy_share_pct,
                    ">=",
                ),
                Evidence("copies per step", round(ms, 2), "ms"),
                Evidence("bytes per step", round(nbytes / 1e6, 2), "MB"),
                Evidence("from pageable memory", round(100.0 * pageable / nbytes, 1), "%"),
                Evidence("ranks copying", len(copies)),
            ),  # fmt: skip
            remedies=(remedy("pin_and_overlap"),),
            basis="the copies' time per step: an upper bound, since a pinned copy still "
            "takes the link's time on the stream",
        )
