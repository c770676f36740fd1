"""The knobs ``tune`` searches: a catalogue of built-in knobs, and the user's own.

A knob in ``--space`` is one of
- a built-in knob (lower case, ``CATALOGUE``): DDP's fusion buffer, threads, binding, ...;
- ``--NAME``: an argument appended to the script's arguments (``--NAME=VALUE``);
- ``NAME`` in upper case: an environment variable of every rank.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

Value = bool | int | float | str
Config = dict[str, Value]

LAUNCH = "launch"
"""A launcher option (ranks, threads, binding)."""
DDP = "ddp"
"""A DDP constructor argument or comm hook, applied by the probe (``probe.ddp.DDP_ENV``)."""
FSDP = "fsdp"
"""A ``fully_shard`` argument or FSDP2 prefetch depth, applied by the probe and by bench
(``probe.fsdp_knobs.FSDP_ENV``)."""
WORKLOAD = "workload"
"""An option of the bench workload; scripts read it through ``scalescope.tune.knobs()``."""
ARG = "arg"
ENV = "env"

GLOBAL_BATCH = "the global batch"
"""What the knobs that change the samples of a step (ranks, batch size) change."""

ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
ARG_NAME = re.compile(r"^--[A-Za-z0-9][A-Za-z0-9_-]*$")


def _bool(text: str) -> bool:
    low = text.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{text!r} is not true or false")


def _positive_float(text: str) -> float:
    value = float(text)
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{text!r} is not a positive number")
    return value


def _int(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text)
        if value < minimum:
            raise ValueError(f"{text!r} is less than {minimum}")
        return value

    return parse


def _choice(*choices: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in choices:
            raise ValueError(f"{text!r} is not one of {', '.join(choices)}")
        return text

    return parse


@dataclass(frozen=True)
class KnobDef:
    """A built-in knob: how its values parse, where it applies, what it changes."""

    parse: Callable[[str], Value]
    kind: str
    defaults: Callable[[SpaceContext], tuple[Value, ...]]
    semantics: str = ""
    """What changes besides speed (numerics, batch); empty when only speed changes."""
    bench: bool = True
    """The bench workload has this knob (all scripts can opt in through the API)."""
    help: str = ""


DDP_LAYOUT = "DDP"
FSDP2_LAYOUT = "FSDP2"


@dataclass(frozen=True)
class SpaceContext:
    """What default values depend on: the ranks, cores and batch of the workload."""

    nproc: int
    cores: int
    batch_size: int = 32
    bench: bool = False
    fsdp: bool = False
    """bench --fsdp: FSDP2's knobs in place of DDP's in the default space."""

    @property
    def layout(self) -> str | None:
        """How the job spreads its model: the bench's DDP or FSDP2; None for a script,
        whose layout is known once a run of it is recorded."""
        if not self.bench:
            return None
        return FSDP2_LAYOUT if self.fsdp else DDP_LAYOUT


def _threads(ctx: SpaceContext) -> tuple[int, ...]:
    per_rank = max(1, ctx.cores // ctx.nproc)
    values = {1, per_rank}
    values.update(t for t in (2, 4, 8, 16, 32, 64) if t < per_rank)
    return tuple(sorted(values))


def _ranks(ctx: SpaceContext) -> tuple[int, ...]:
    return tuple(sorted({1, ctx.nproc, *(n for n in (2, 4, 8) if n <= ctx.cores)}))


CATALOGUE: dict[str, KnobDef] = {
    "bucket_cap_mb": KnobDef(
        _positive_float, DDP, lambda c: (1.0, 5.0, 25.0, 100.0),
        help="DDP gradient bucket size in MB (the fusion buffer)",
    ),
    "gradient_as_bucket_view": KnobDef(
        _bool, DDP, lambda c: (False, True), help="gradients as views into DDP's buckets"
    ),
    "comm_hook": KnobDef(
        _choice("none", "fp16", "bf16"), DDP, lambda c: ("none", "bf16", "fp16"),
        semantics="the numerics: gradients all-reduced in 16 bits",
        help="gradient compression comm hook",
    ),
    "reshard_after_forward": KnobDef(
        _bool, FSDP, lambda c: (True, False),
        help="FSDP2: free gathered parameters after forward (False: one gather a step)",
    ),
    "fsdp_prefetch": KnobDef(
        _int(1), FSDP, lambda c: (1, 2, 3),
        help="FSDP2: units gathered ahead in forward and backward (1: torch's own)",
    ),
    "nproc_per_node": KnobDef(
        _int(1), LAUNCH, _ranks, semantics=GLOBAL_BATCH,
        help="ranks on the node",
    ),
    "threads_per_rank": KnobDef(
        _int(1), LAUNCH, _threads, help="intra-op (OpenMP) threads per rank"
    ),
    "bind_to": KnobDef(
        _choice("domain", "core", "none"), LAUNCH, lambda c: ("domain", "core", "none"),
        help="CPU binding of each rank",
    ),
    "map_by": KnobDef(
        _choice("numa", "socket", "node", "core"), LAUNCH, lambda c: ("numa", "socket", "node"),
        help="domains the ranks are spread over",
    ),
    "workers": KnobDef(
        _int(0), WORKLOAD, lambda c: (0, 1, 2, 4), help="DataLoader workers per rank"
    ),
    "pin_memory": KnobDef(_bool, WORKLOAD, lambda c: (False, True), help="DataLoader pin_memory"),
    "prefetch_factor": KnobDef(
        _int(1), WORKLOAD, lambda c: (2, 4), bench=False, help="DataLoader prefetch_factor"
    ),
    "channels_last": KnobDef(
        _bool, WORKLOAD, lambda c: (False, True), help="channels_last memory format"
    ),
    "bf16": KnobDef(
        _bool, WORKLOAD, lambda c: (False, True), semantics="the numerics: bfloat16 autocast",
        help="bfloat16 autocast",
    ),
    "batch_size": KnobDef(
        _int(1), WORKLOAD,
        lambda c: tuple(sorted({max(1, c.batch_size // 2), c.batch_size, 2 * c.batch_size})),
        semantics=GLOBAL_BATCH, help="samples per rank per step (scale the learning rate)",
    ),
}  # fmt: skip


def misfits(layout: str | None) -> dict[str, str]:
    """The built-in knobs a layout cannot take, each with why (none for an unknown layout):
    FSDP2 shards only contiguous parameters, so channels_last fails it; DDP's knobs do
    nothing without DDP, FSDP2's without FSDP2."""
    if layout == FSDP2_LAYOUT:
        out = dict.fromkeys(_of_kind(DDP), "a DDP knob, and FSDP2 has no DDP")
        out["channels_last"] = "FSDP2 cannot shard the non-contiguous parameters it makes"
        return out
    if layout == DDP_LAYOUT:
        return dict.fromkeys(_of_kind(FSDP), "an FSDP2 knob, and DDP does not shard")
    return {}


def _of_kind(kind: str) -> list[str]:
    return [name for name, knob in CATALOGUE.items() if knob.kind == kind]


DEFAULT_KNOBS = ("bucket_cap_mb", "gradient_as_bucket_view", "threads_per_rank", "bind_to")
DEFAULT_BENCH_KNOBS = (*DEFAULT_KNOBS, "workers", "channels_last")
DEFAULT_FSDP_BENCH_KNOBS = (
    "reshard_after_forward", "fsdp_prefetch", "threads_per_rank", "bind_to", "workers",
    "channels_last",
)  # fmt: skip
"""Searched when no ``--space`` is given. Knobs that change the numerics or the batch are
searched only when named, so they are never applied silently."""


@dataclass(frozen=True)
class Knob:
    """One searched knob and its candidate values."""

    name: str
    values: tuple[Value, ...]
    kind: str
    semantics: str = ""

    @property
    def ordered(self) -> bool:
        """Numbers (not booleans): searched as an ordered range, so trends can be followed."""
        return all(isinstance(v, int | float) and not isinstance(v, bool) for v in self.values)


Space = tuple[Knob, ...]


def _unknown(name: str) -> ValueError:
    known = ", ".join(CATALOGUE)
    return ValueError(
        f"unknown knob {name!r}: built-in knobs are {known}; give a script argument as "
        f"--{name}=... or an environment variable in upper case"
    )


def _parse_values(name: str, text: str, parse: Callable[[str], Value]) -> tuple[Value, ...]:
    items = [t.strip() for t in text.split(",")]
    if not text.strip() or any(not t for t in items):
        raise ValueError(f"--space {name}: empty value in {text!r}")
    try:
        values = tuple(parse(t) for t in items)
    except ValueError as exc:
        raise ValueError(f"--space {name}: {exc}") from exc
    if len(set(values)) != len(values):
        raise ValueError(f"--space {name}: a value is repeated in {text!r}")
    return values


def parse_knob(item: str, ctx: SpaceContext) -> Knob:
    """``NAME=V1,V2,...`` (or a built-in ``NAME`` alone, for its default values)."""
    name, sep, text = item.partition("=")
    name = name.strip()
    if not name:
        raise ValueError(f"--space {item!r}: give NAME=VALUE,VALUE,...")
    if name in CATALOGUE:
        knob = CATALOGUE[name]
        if ctx.bench and not knob.bench:
            raise ValueError(f"--space {name}: the bench workload has no such knob")
        why = misfits(ctx.layout).get(name)
        if why:
            raise ValueError(f"--space {name}: not for this {ctx.layout} job: {why}")
        values = _parse_values(name, text, knob.parse) if sep else knob.defaults(ctx)
        return Knob(name, _sorted(values), knob.kind, knob.semantics)
    if ARG_NAME.match(name) or ENV_NAME.match(name):
        if not sep:
            raise ValueError(f"--space {name}: give its values, {name}=VALUE,VALUE,...")
        values = _parse_values(name, text, _number_or_text)
        kind = ARG if name.startswith("--") else ENV
        return Knob(name, _sorted(values), kind)
    raise _unknown(name)


def _number_or_text(text: str) -> Value:
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            continue
    return text


def _sorted(values: tuple[Value, ...]) -> tuple[Value, ...]:
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return tuple(sorted(values))
    return values


def parse_space(items: Iterable[str] | None, ctx: SpaceContext) -> Space:
    """The knobs of ``--space`` items, or the default space; one that cannot vary is an error."""
    items = list(items or [])
    if items:
        knobs = [parse_knob(item, ctx) for item in items]
    else:
        left_out = misfits(ctx.layout)
        names = [n for n in default_names(ctx) if n not in left_out]
        knobs = [parse_knob(name, ctx) for name in names]
        knobs = [k for k in knobs if len(k.values) > 1]
    names = [k.name for k in knobs]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate:
        raise ValueError(f"--space {duplicate}: the knob is given twice")
    if space_size(knobs) < 2:
        raise ValueError(
            "nothing to search: the space has a single point (give a knob two or more values)"
        )
    return tuple(knobs)


def default_names(ctx: SpaceContext) -> tuple[str, ...]:
    """The knobs searched when no ``--space`` is given, before the layout's misfits go."""
    if ctx.bench:
        return DEFAULT_FSDP_BENCH_KNOBS if ctx.fsdp else DEFAULT_BENCH_KNOBS
    return DEFAULT_KNOBS


def left_out_note(items: Iterable[str] | None, ctx: SpaceContext) -> str:
    """The one line saying which default knobs the job's layout left out and why; empty
    when ``--space`` was given (a misfit there is an error) or none was left out."""
    if list(items or []):
        return ""
    why = misfits(ctx.layout)
    gone = [n for n in default_names(ctx) if n in why]
    if not gone:
        return ""
    reasons = "; ".join(f"{n} ({why[n]})" for n in gone)
    return f"left out for this {ctx.layout} job: {reasons}"


def space_size(space: Iterable[Knob]) -> int:
    return math.prod(len(k.values) for k in space)


def format_value(value: Value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def config_key(space: Space, config: Config) -> tuple[Value, ...]:
    """The point of the space a configuration is (for runs measured more than once)."""
    return tuple(config.get(k.name) for k in space)
