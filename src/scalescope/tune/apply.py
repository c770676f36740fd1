"""A configuration of the knobs applied to the user's workload: the trial's RunSpec and
environment, and the command line that reuses it."""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from scalescope.bench.options import BenchOptions
from scalescope.launch.run.runner import RunSpec
from scalescope.probe.ddp import BUCKET_CAP_ENV, BUCKET_VIEW_ENV, COMM_HOOK_ENV
from scalescope.probe.fsdp_knobs import PREFETCH_ENV, RESHARD_ENV
from scalescope.tune.api import KNOBS_ENV
from scalescope.tune.space import (
    ARG,
    DDP,
    ENV,
    FSDP,
    LAUNCH,
    WORKLOAD,
    Config,
    Space,
    SpaceContext,
    format_value,
    left_out_note,
    parse_space,
)  # fmt: skip

DDP_VARIABLES = {
    "bucket_cap_mb": BUCKET_CAP_ENV,
    "gradient_as_bucket_view": BUCKET_VIEW_ENV,
    "comm_hook": COMM_HOOK_ENV,
    "reshard_after_forward": RESHARD_ENV,
    "fsdp_prefetch": PREFETCH_ENV,
}
BENCH_FIELDS = ("bucket_cap_mb", "workers", "pin_memory", "channels_last", "bf16", "batch_size")
"""Knobs that are options of ``scalescope bench`` (the rest reach it like any script)."""


@dataclass(frozen=True)
class TuneTarget:
    """The workload as the user gave it: its launch spec and, for bench, its options."""

    spec: RunSpec
    bench: BenchOptions | None = None

    @property
    def name(self) -> str:
        return self.bench.model if self.bench else Path(self.spec.target).stem


@dataclass(frozen=True)
class TrialSetup:
    spec: RunSpec
    env: dict[str, str]
    """Variables for the ranks (set in the launcher's environment during the trial)."""


def _launch(spec: RunSpec, config: Config) -> RunSpec:
    mapping, launch = spec.mapping, spec.launch
    if "threads_per_rank" in config:
        mapping = replace(mapping, threads_per_rank=config["threads_per_rank"], oversubscribe=True)
    if "map_by" in config:
        mapping = replace(mapping, map_by=config["map_by"])
    if "bind_to" in config:
        bind_to = config["bind_to"]
        mapping = replace(mapping, no_bind=bind_to == "none")
        if bind_to != "none":
            mapping = replace(mapping, bind_to=bind_to)
    if "nproc_per_node" in config:
        launch = replace(launch, nproc_per_node=config["nproc_per_node"])
    return replace(spec, mapping=mapping, launch=launch)


def trial_setup(target: TuneTarget, space: Space, config: Config, run_dir: Path) -> TrialSetup:
    """The RunSpec and environment of one trial of ``config`` (knobs not in it stay as given)."""
    kinds = {k.name: k.kind for k in space}
    spec = _launch(replace(target.spec, run_dir=run_dir), config)
    env: dict[str, str] = {}
    args = list(spec.args)
    api: dict[str, Any] = {}
    bench_values = {}
    for name, value in config.items():
        kind = kinds[name]
        if target.bench is not None and name in BENCH_FIELDS:
            bench_values[name] = value
        elif kind in (DDP, FSDP):
            env[DDP_VARIABLES[name]] = format_value(value)
        elif kind == WORKLOAD:
            api[name] = value
        elif kind == ARG:
            args = with_arg(args, name, format_value(value))
        elif kind == ENV:
            env[name] = format_value(value)
    if api:
        env[KNOBS_ENV] = json.dumps(api)
    options = dict(spec.options)
    if target.bench is not None:
        bench = replace(target.bench, **bench_values)
        args, options = bench.workload_args(), bench.as_dict()
    options["tune"] = dict(config)
    return TrialSetup(replace(spec, args=args, options=options), env)


def with_arg(args: list[str], name: str, value: str) -> list[str]:
    """``args`` with ``name=value`` in place of the script's own ``name``, else appended."""
    out, i, replaced = [], 0, False
    while i < len(args):
        word = args[i]
        if word == name and i + 1 < len(args):
            out.append(f"{name}={value}")
            i += 2
            replaced = True
            continue
        if word.startswith(name + "="):
            out.append(f"{name}={value}")
            replaced = True
        else:
            out.append(word)
        i += 1
    return out if replaced else [*out, f"{name}={value}"]


LAUNCH_FLAGS = {
    "nproc_per_node": "-n",
    "threads_per_rank": "--threads-per-rank",
    "map_by": "--map-by",
}


def _launch_flags(config: Config) -> list[str]:
    flags = []
    for name, flag in LAUNCH_FLAGS.items():
        if name in config:
            flags += [flag, format_value(config[name])]
    if config.get("bind_to") == "none":
        flags.append("--no-bind")
    elif "bind_to" in config:
        flags += ["--bind-to", str(config["bind_to"])]
    return flags


def _bench_flags(config: Config) -> list[str]:
    flags = []
    for name in BENCH_FIELDS:
        if name not in config:
            continue
        value = config[name]
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            flags.append(flag if value else f"--no-{flag[2:]}")
        else:
            flags += [flag, format_value(value)]
    return flags


def reuse_command(target: TuneTarget, space: Space, config: Config) -> str:
    """The command line (variables first) that runs ``config`` again with scalescope."""
    setup = trial_setup(target, space, config, Path("RUN"))
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(setup.env.items()))
    n = ["-n", str(target.spec.launch.nproc_per_node)] if "nproc_per_node" not in config else []
    launch = n + _launch_flags(config)
    if target.bench is not None:
        sizes = {"batch_size": target.bench.batch_size, "image_size": target.bench.image_size}
        given = [f"--{k.replace('_', '-')}={v}" for k, v in sizes.items() if k not in config and v]
        words = ["scalescope", "bench", target.bench.model, *launch, *_bench_flags(config)]
        words += given + (["--fsdp"] if target.bench.fsdp else [])
    else:
        module = ["-m"] if target.spec.is_module else []
        args = setup.spec.args
        words = ["scalescope", "run", *launch, *module, target.spec.target, *args]
    command = " ".join(shlex.quote(w) for w in words)
    return f"{env} {command}" if env else command


def baseline_config(target: TuneTarget, space: Space) -> Config | None:
    """The knob values of the workload as given, when every one is known and in the space."""
    config: Config = {}
    for knob in space:
        value = _given_value(target, knob.name, knob.kind)
        if value is None:
            return None
        match = [v for v in knob.values if format_value(v) == format_value(value)]
        if not match:
            return None
        config[knob.name] = match[0]
    return config


BENCH_DDP = {
    "gradient_as_bucket_view": False, "comm_hook": "none",
    "reshard_after_forward": True, "fsdp_prefetch": 1,
}  # fmt: skip
"""What the bench workload's DDP (and, with --fsdp, FSDP2) runs with when tune does not
change it."""


def _given_value(target: TuneTarget, name: str, kind: str) -> Any:
    spec = target.spec
    if target.bench is not None:
        if name == "workers" and target.bench.workers is None:
            return 0 if target.bench.data is None else 2
        if name in BENCH_FIELDS:
            return getattr(target.bench, name)
        if name in BENCH_DDP:
            return BENCH_DDP[name]
    if kind == ENV:
        return os.environ.get(name)
    if kind == ARG:
        return _arg_value(spec.args, name)
    if kind == LAUNCH:
        return _launch_value(spec, name)
    return None


def _arg_value(args: list[str], name: str) -> str | None:
    value = None
    for i, word in enumerate(args):
        if word.startswith(name + "="):
            value = word.split("=", 1)[1]
        elif word == name and i + 1 < len(args):
            value = args[i + 1]
    return value


def _launch_value(spec: RunSpec, name: str) -> Any:
    if name == "nproc_per_node":
        return spec.launch.nproc_per_node
    if name == "map_by":
        return spec.mapping.map_by
    if name == "bind_to":
        return spec.mapping.bind_to if spec.mapping.bind else "none"
    return spec.mapping.threads_per_rank


def space_context(target: TuneTarget) -> SpaceContext:
    """What the workload's space depends on: its ranks, the node's cores, its batch and
    layout (bench, --fsdp)."""
    import psutil

    from scalescope.bench.options import DEFAULT_BATCH

    return SpaceContext(
        nproc=target.spec.launch.nproc_per_node,
        cores=psutil.cpu_count(logical=False) or 1,
        batch_size=(target.bench.batch_size if target.bench else None) or DEFAULT_BATCH,
        bench=target.bench is not None,
        fsdp=bool(target.bench and target.bench.fsdp),
    )


def target_space(target: TuneTarget, items: list[str] | None) -> tuple[Space, tuple[str, ...]]:
    """The space of ``--space`` items (or the default one) for this workload, and the note
    on the default knobs its layout left out (none, or one line)."""
    ctx = space_context(target)
    space = parse_space(items, ctx)
    check_receivable(target, space)
    note = left_out_note(items, ctx)
    return space, (note,) if note else ()


def check_receivable(target: TuneTarget, space: Space) -> None:
    """A script receives the workload knobs (workers, batch_size, ...) only through
    ``scalescope.tune.knobs()``: searching them in a script that never calls it would
    measure the same configuration under other names. A ValueError names the first."""
    wanted = [k.name for k in space if k.kind == WORKLOAD]
    if target.bench is not None or not wanted:
        return
    source = script_source(target.spec)
    if source is not None and "knobs(" not in source:
        raise ValueError(
            f"--space {wanted[0]}: {target.spec.target} never calls scalescope.tune.knobs(), "
            f"so it cannot receive {', '.join(wanted)} (docs/tune.md: scripts opt in)"
        )


def script_source(spec: RunSpec) -> str | None:
    """The text of the script (or the module's file); None when it cannot be read."""
    try:
        if spec.is_module:
            import importlib.util

            found = importlib.util.find_spec(spec.target)
            origin = found.origin if found is not None else None
            return Path(origin).read_text(errors="replace") if origin else None
        return Path(spec.target).read_text(errors="replace")
    except (OSError, ImportError, ValueError):
        return None


def default_study_dir(target: TuneTarget) -> Path:
    import time
    import uuid

    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path("scalescope_runs") / f"tune-{target.name}-{stamp}-{uuid.uuid4().hex[:4]}"
