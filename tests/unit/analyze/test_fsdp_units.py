"""FSDP units from the per-step traffic of their tags (events/tags.py)."""

from __future__ import annotations

from scalescope.analyze.comm.collectives import TagPerStep, UnitTraffic, fsdp_units


def per_step(tag: str, calls: float, nbytes: float, ms: float) -> TagPerStep:
    return TagPerStep(tag, 2, nbytes, calls, ms)


def test_each_unit_gets_its_gathers_and_reductions_the_root_last() -> None:
    units = fsdp_units(
        (
            per_step("gradients", 3, 900, 1.0),
            per_step("reduce_grads:layers.1", 1, 400, 0.5),
            per_step("unshard:layers.1", 2, 800, 2.0),
            per_step("unshard:root", 1, 100, 0.25),
            per_step("reduce_grads:root", 1, 100, 0.125),
            per_step("unshard:layers.0", 2, 800, 1.5),
            per_step("user", 1, 8, 0.1),
        )
    )
    assert units == (
        UnitTraffic("layers.0", 2, 800, 1.5, 0, 0, 0),
        UnitTraffic("layers.1", 2, 800, 2.0, 1, 400, 0.5),
        UnitTraffic("root", 1, 100, 0.25, 1, 100, 0.125),
    )


def test_no_fsdp_tag_no_units() -> None:
    assert fsdp_units((per_step("gradients", 3, 900, 1.0), per_step("user", 1, 8, 0.1))) == ()
