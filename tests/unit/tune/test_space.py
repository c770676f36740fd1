"""The knob space: --space items, default spaces, errors for bad input."""

from __future__ import annotations

import pytest

from scalescope.tune.space import (
    ARG,
    DDP,
    ENV,
    LAUNCH,
    SpaceContext,
    config_key,
    format_value,
    parse_space,
    space_size,
)

CTX = SpaceContext(nproc=2, cores=8, batch_size=32)


def test_builtin_user_argument_and_environment_knobs() -> None:
    space = parse_space(["bucket_cap_mb=100,5,25", "--batch=64,32", "PAUSE=a,b"], CTX)
    bucket, batch, pause = space
    assert (bucket.kind, bucket.values, bucket.ordered) == (DDP, (5.0, 25.0, 100.0), True)
    assert (batch.kind, batch.values, batch.ordered) == (ARG, (32, 64), True)
    assert (pause.kind, pause.values, pause.ordered) == (ENV, ("a", "b"), False)
    assert space_size(space) == 3 * 2 * 2


def test_builtin_knob_alone_takes_its_default_values() -> None:
    (threads,) = parse_space(["threads_per_rank"], CTX)
    assert threads.kind == LAUNCH
    assert threads.values == (1, 2, 4)  # 8 cores / 2 ranks: powers of two up to 4


def test_default_space_leaves_out_knobs_that_change_semantics_and_single_values() -> None:
    script = parse_space(None, SpaceContext(nproc=2, cores=2))
    names = [k.name for k in script]
    assert "threads_per_rank" not in names  # 2 cores / 2 ranks: only 1 thread to try
    assert {"bucket_cap_mb", "gradient_as_bucket_view", "bind_to"} <= set(names)
    bench = parse_space(None, SpaceContext(nproc=1, cores=4, bench=True))
    assert {"workers", "channels_last"} <= {k.name for k in bench}
    assert not any(k.semantics for k in (*script, *bench))


@pytest.mark.parametrize(
    ("items", "message"),
    [
        (["fusion=1,2"], "unknown knob 'fusion'"),
        ([""], "give NAME=VALUE"),
        (["bucket_cap_mb=5"], "nothing to search: the space has a single point"),
        (["bucket_cap_mb=5,,6"], "empty value"),
        (["bucket_cap_mb=5,-1"], "not a positive number"),
        (["workers=2,2"], "repeated"),
        (["bind_to=core,[x]"], "'[x]' is not one of"),
        (["--lr"], "give its values"),
        (["workers=1,2", "workers=3,4"], "given twice"),
    ],
)
def test_bad_space(items: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_space(items, CTX)


def test_knob_the_bench_lacks() -> None:
    with pytest.raises(ValueError, match="bench workload has no such knob"):
        parse_space(["prefetch_factor=2,4"], SpaceContext(nproc=1, cores=2, bench=True))


def test_values_format_and_points() -> None:
    assert [format_value(v) for v in (True, 25.0, 2.5, "x")] == ["true", "25", "2.5", "x"]
    space = parse_space(["workers=0,2", "pin_memory"], CTX)
    assert config_key(space, {"pin_memory": True, "workers": 2}) == (2, True)
