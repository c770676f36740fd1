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
    left_out_note,
    misfits,
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


FSDP2_BENCH = SpaceContext(nproc=2, cores=8, bench=True, fsdp=True)
DDP_BENCH = SpaceContext(nproc=2, cores=8, bench=True)


def test_an_fsdp2_bench_searches_no_knob_its_layout_cannot_take() -> None:
    """FSDP2 shards only contiguous parameters: channels_last would fail every trial with
    it, so the default space leaves it out and says so in one line; DDP's knobs are not in
    it either."""
    names = {k.name for k in parse_space(None, FSDP2_BENCH)}
    assert {"reshard_after_forward", "fsdp_prefetch", "workers"} <= names
    assert not names & {"channels_last", "bucket_cap_mb", "gradient_as_bucket_view", "comm_hook"}
    assert left_out_note(None, FSDP2_BENCH) == (
        "left out for this FSDP2 job: channels_last (FSDP2 cannot shard the non-contiguous "
        "parameters it makes)"
    )
    assert left_out_note(["workers=0,1"], FSDP2_BENCH) == "", "a given space leaves none out"


def test_a_ddp_bench_keeps_channels_last_and_leaves_nothing_out() -> None:
    names = {k.name for k in parse_space(None, DDP_BENCH)}
    assert {"bucket_cap_mb", "gradient_as_bucket_view", "channels_last", "workers"} <= names
    assert not names & {"reshard_after_forward", "fsdp_prefetch"}
    assert left_out_note(None, DDP_BENCH) == ""
    assert misfits(None) == {}, "a script's layout is not known before it runs"
    assert parse_space(["channels_last", "bucket_cap_mb=5,25"], DDP_BENCH)


@pytest.mark.parametrize(
    ("ctx", "item", "message"),
    [
        (FSDP2_BENCH, "channels_last", "not for this FSDP2 job: FSDP2 cannot shard the non-"),
        (FSDP2_BENCH, "bucket_cap_mb=5,25", "not for this FSDP2 job: a DDP knob, and FSDP2 has"),
        (FSDP2_BENCH, "comm_hook", "a DDP knob"),
        (DDP_BENCH, "fsdp_prefetch=1,2", "not for this DDP job: an FSDP2 knob, and DDP does not"),
        (DDP_BENCH, "reshard_after_forward", "an FSDP2 knob"),
    ],
)
def test_a_knob_the_layout_cannot_take_is_a_one_line_error(ctx, item, message) -> None:
    with pytest.raises(ValueError, match=message) as caught:
        parse_space([item, "workers=0,1"], ctx)
    assert "\n" not in str(caught.value) and str(caught.value).startswith("--space ")
