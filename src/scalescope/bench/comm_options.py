"""Options of ``scalescope comm``, checked before any rank starts: ops, sizes, dtype, backends."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

OP_ALIASES = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "reducescatter": "reduce_scatter",
    "broadcast": "broadcast",
    "bcast": "broadcast",
    "alltoall": "all_to_all",
    "sendrecv": "sendrecv",
}
"""User spellings (nccl-tests' and ours, with or without underscores) -> the probe's op names."""
OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "sendrecv")
BACKENDS = ("gloo", "nccl", "mpi")
DTYPES = {
    "float32": 4,
    "float64": 8,
    "float16": 2,
    "bfloat16": 2,
    "int32": 4,
    "int64": 8,
    "int8": 1,
}
"""dtype -> bytes per element."""
UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_op(name: str) -> str:
    key = name.strip().lower().replace("_", "").replace("-", "")
    if key not in OP_ALIASES:
        raise ValueError(f"unknown op {name!r}: choose from {', '.join(sorted(OP_ALIASES))}")
    return OP_ALIASES[key]


def parse_bytes(text: str) -> int:
    """'8' -> 8, '1K' -> 1024, '256M' -> 268435456 (binary units, like nccl-tests -b/-e)."""
    match = re.fullmatch(r"\s*(\d+)\s*([KMG]?)(i?B)?\s*", text, flags=re.IGNORECASE)
    if match is None:
        raise ValueError(f"not a size: {text!r} (use bytes like 8, 64K, 256M, 1G)")
    return int(match.group(1)) * UNITS[match.group(2).upper()]


def parse_sizes(spec: str, factor: int) -> tuple[int, ...]:
    """MIN:MAX stepping by ``factor`` (nccl-tests -b MIN -e MAX -f factor), or a list 8,1M."""
    if factor < 2:
        raise ValueError(f"--factor must be 2 or more, got {factor}")
    if ":" not in spec:
        sizes = sorted({parse_bytes(part) for part in spec.split(",") if part.strip()})
    else:
        low_text, _, high_text = spec.partition(":")
        low, high = parse_bytes(low_text), parse_bytes(high_text)
        if low < 1 or high < low:
            raise ValueError(f"--sizes {spec!r}: need 1 <= MIN <= MAX")
        sizes, size = [], low
        while size <= high:
            sizes.append(size)
            size *= factor
    if not sizes or sizes[0] < 1:
        raise ValueError(f"--sizes {spec!r}: sizes must be at least 1 byte")
    return tuple(sizes)


def backend_unavailable(backend: str) -> str | None:
    """Why this torch build or machine cannot run ``backend``; None when it can."""
    import torch
    import torch.distributed as dist

    if backend == "gloo":
        return None if dist.is_gloo_available() else "torch built without gloo"
    if backend == "nccl":
        if not dist.is_nccl_available():
            return "torch built without NCCL"
        return None if torch.cuda.is_available() else "no CUDA device"
    return None if dist.is_mpi_available() else "torch built without MPI"


@dataclass(frozen=True, kw_only=True)
class CommOptions:
    ops: tuple[str, ...]
    sizes: tuple[int, ...]
    dtype: str = "float32"
    backends: tuple[str, ...] = ("gloo",)
    iters: int = 20
    warmup: int = 5

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ValueError(f"unknown --dtype {self.dtype!r}: choose from {', '.join(DTYPES)}")
        unknown = [b for b in self.backends if b not in BACKENDS]
        if unknown or not self.backends:
            raise ValueError(f"unknown --backend {','.join(unknown)!r}: choose from gloo,nccl,mpi")
        if self.iters < 1 or self.warmup < 0:
            raise ValueError("--iters must be >= 1 and --warmup >= 0")

    @classmethod
    def parse(
        cls, ops: str, sizes: str, factor: int, dtype: str, backends: str, iters: int, warmup: int
    ) -> CommOptions:
        """From the command line's strings; a bad one is a ValueError naming it."""
        names = tuple(dict.fromkeys(parse_op(o) for o in ops.split(",") if o.strip()))
        if not names:
            raise ValueError("--ops is empty")
        chosen = tuple(dict.fromkeys(b.strip().lower() for b in backends.split(",") if b.strip()))
        return cls(
            ops=names,
            sizes=parse_sizes(sizes, factor),
            dtype=dtype,
            backends=chosen,
            iters=iters,
            warmup=warmup,
        )

    def split_backends(self) -> tuple[tuple[str, ...], dict[str, str]]:
        """(backends to run, {backend: why it is unavailable})."""
        reasons = {b: backend_unavailable(b) for b in self.backends}
        return tuple(b for b, r in reasons.items() if r is None), {
            b: r for b, r in reasons.items() if r is not None
        }

    def workload_args(self, backends: tuple[str, ...]) -> list[str]:
        """Arguments of ``python -m scalescope.bench.comm`` for the backends that can run."""
        return [
            f"--ops={','.join(self.ops)}",
            f"--sizes={','.join(str(s) for s in self.sizes)}",
            f"--dtype={self.dtype}",
            f"--backends={','.join(backends)}",
            f"--iters={self.iters}",
            f"--warmup={self.warmup}",
        ]

    def as_dict(self) -> dict[str, Any]:
        values = asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}
