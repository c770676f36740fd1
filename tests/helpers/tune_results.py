"""A small study result for the tune renderers' tests (its user strings can be hostile)."""

from __future__ import annotations

from scalescope.tune.result import ConfirmRun, TrialRecord, TuneResult
from scalescope.tune.space import SpaceContext, parse_space


def tune_result(evil: str = "x", confirmations: tuple[ConfirmRun, ...] = ()) -> TuneResult:
    space = parse_space(["bucket_cap_mb=5,25", f"--tag=a,{evil}", "bf16"], SpaceContext(2, 8))
    rows = [
        (0, {"bucket_cap_mb": 25.0, "--tag": "a", "bf16": False}, "ok", 100.0),
        (1, {"bucket_cap_mb": 5.0, "--tag": evil, "bf16": False}, "ok", 125.0),
        (2, {"bucket_cap_mb": 5.0, "--tag": "a", "bf16": True}, "ok", 150.0),
        (3, {"bucket_cap_mb": 25.0, "--tag": evil, "bf16": True}, "failed", None),
    ]
    records = tuple(
        TrialRecord(
            n, c, s, v, "samples/s", 2.0, f"trials/trial-{n}",
            error=f"RuntimeError: {evil}" if s == "failed" else None, baseline=n == 0,
        )
        for n, c, s, v in rows
    )  # fmt: skip
    reuse = f"scalescope run t.py --tag={evil}"
    return TuneResult(evil, space, records, "finished", reuse, confirmations)


def confirm_run(trial: int, round_: int, rate: float) -> ConfirmRun:
    return ConfirmRun(trial, round_, "ok", rate, "samples/s", 2.0, f"trials/c-{trial}-{round_}")
