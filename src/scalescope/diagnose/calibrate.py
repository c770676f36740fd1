"""Thresholds a user sets: ``--threshold NAME=VALUE`` and ``--baseline RUN_DIR``.

The compute and placement savings are estimated against a run that computes at
``flops_expected_fraction`` of a peak estimated from the facts. What tuned training
reaches of that estimate differs from machine to machine (turbo clocks, memory bandwidth,
the BLAS in the build), so a user who has a good run of the workload on the same machine
can hand it in: the FLOP/s fraction it reached becomes the expected one, and savings are
then measured against what this machine really does.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path

from scalescope.diagnose.thresholds import DEFAULT_THRESHOLDS, Thresholds


@dataclass(frozen=True)
class Calibration:
    thresholds: Thresholds
    """``flops_expected_fraction``: what the baseline reached of the estimated peak."""
    note: str
    """One line for the terminal: what was calibrated from what."""


def threshold_names() -> list[str]:
    return [f.name for f in fields(Thresholds)]


def parse_overrides(items: list[str], base: Thresholds = DEFAULT_THRESHOLDS) -> Thresholds:
    """``["data_share_pct=20", ...]`` applied to ``base``; ``ValueError`` on a bad item."""
    types = {f.name: f.type for f in fields(Thresholds)}
    values: dict[str, float | int] = {}
    for item in items:
        name, sep, text = item.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or name not in types:
            raise ValueError(
                f"--threshold {item!r}: expected NAME=VALUE with NAME one of "
                + ", ".join(threshold_names())
            )
        try:
            values[name] = int(text) if types[name] in ("int", int) else float(text)
        except ValueError:
            raise ValueError(f"--threshold {item!r}: {text!r} is not a number") from None
    try:
        return replace(base, **values)
    except ValueError as exc:
        raise ValueError(f"--threshold: {exc}") from None


def calibrate(baseline_dir: Path, base: Thresholds = DEFAULT_THRESHOLDS) -> Calibration:
    """Thresholds whose expected FLOP/s fraction is the one ``baseline_dir`` reached
    (its low mark half of it, as in the defaults); ``ValueError`` when it cannot say."""
    from scalescope.diagnose.engine import diagnosis_input
    from scalescope.diagnose.recording import Recording
    from scalescope.diagnose.rules_flops import efficiency

    rec = Recording.load(baseline_dir, base)
    run = rec.run
    eff = efficiency(diagnosis_input(rec.run, rec.analysis, base))
    if isinstance(eff, str):
        raise ValueError(f"--baseline {baseline_dir}: its FLOP/s cannot be judged: {eff}")
    fraction = min(eff.fraction, 1.0)
    thresholds = replace(
        base,
        flops_expected_fraction=fraction,
        flops_low_fraction=min(base.flops_low_fraction, fraction / 2),
    )
    model = str(run.meta.options.get("model") or run.meta.workload)
    note = (
        f"expected FLOP/s: {100 * fraction:.0f}% of the estimated peak, as reached by the "
        f"baseline {baseline_dir} ({model}); the default is "
        f"{100 * base.flops_expected_fraction:.0f}%"
    )
    return Calibration(thresholds, note)
