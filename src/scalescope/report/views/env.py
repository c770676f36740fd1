"""``scalescope env``: the environment facts and their warnings, for people and programs.

``env_document`` holds the facts (software and build, CPU and memory, GPUs with their
catalogue peaks, threads and allocator) and the warnings, for the terminal and any other
renderer; ``env_json`` encodes the same content in its own schema (docs/env.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from scalescope.diagnose.env_checks import EnvWarning
from scalescope.events.units import fmt_bytes
from scalescope.report.document import Block, Column, Document, Grid, Line, Style, Table
from scalescope.report.formatting import NA
from scalescope.report.subjects import EnvReport

ENV_SCHEMA = "scalescope.env/1"


def _text(value: Any) -> str:
    if value is None or value == "":
        return NA
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _size(nbytes: int | None) -> str:
    return NA if nbytes is None else fmt_bytes(nbytes)


def _grid(title: str, rows: Iterable[tuple[str, Any]]) -> Grid:
    return Grid(tuple((key, _text(value)) for key, value in rows), title=title)


def _backends(software: dict[str, Any]) -> str:
    backends = software.get("backends") or {}
    have = [name for name, ok in backends.items() if ok]
    lack = [name for name, ok in backends.items() if not ok]
    text = ", ".join(have) or "none"
    return f"{text} (not: {', '.join(lack)})" if lack else text


def _software_rows(software: dict[str, Any]) -> list[tuple[str, Any]]:
    build = software.get("build") or {}
    onednn = software.get("mkldnn")
    if onednn and build.get("mkldnn_version"):
        onednn = f"yes, v{build['mkldnn_version']}"
    capability = software.get("cpu_capability")
    return [
        ("python", software.get("python")),
        ("torch", f"{software.get('torch')} ({_text(software.get('torch_git'))[:12]})"),
        ("compiler", build.get("compiler")),
        ("BLAS / LAPACK", f"{_text(build.get('blas'))} / {_text(build.get('lapack'))}"),
        ("MKL", build.get("mkl_version") or software.get("mkl")),
        ("oneDNN (MKL-DNN)", onednn),
        ("OpenMP", build.get("openmp_version") or software.get("openmp")),
        ("parallel backend", build.get("parallel_backend")),
        (
            "CPU capability",
            f"{_text(capability)} (build: {_text(build.get('cpu_capability_usage'))})",
        ),
        (
            "CUDA",
            f"{_text(software.get('cuda'))} (available: {_text(software.get('cuda_available'))})",
        ),
        ("cuDNN", software.get("cudnn")),
        ("NCCL", software.get("nccl")),
        ("distributed backends", _backends(software)),
    ]


def _cpu_rows(hardware: dict[str, Any]) -> list[tuple[str, Any]]:
    cores = (
        f"{_text(hardware.get('physical_cores'))} physical, "
        f"{_text(hardware.get('logical_cores'))} logical, "
        f"{_text(hardware.get('usable_cores'))} usable by this process"
    )
    smt = hardware.get("hyperthreading")
    if smt is not None:
        smt = f"{_text(smt)} (hardware threads per core: {_text(hardware.get('threads_per_core'))})"
    sve = hardware.get("sve_vector_bits")
    return [
        ("host", hardware.get("hostname")),
        ("CPU", f"{_text(hardware.get('cpu_model'))} ({_text(hardware.get('machine'))})"),
        ("ISA flags", " ".join(hardware.get("isa_flags") or []) or None),
        *([("SVE vector length", f"{sve} bits")] if sve else []),
        ("sockets", hardware.get("sockets")),
        ("cores", cores),
        ("hyper-threading", smt),
        ("memory", _size(hardware.get("memory_bytes"))),
    ]


NUMA_COLUMNS = (Column("node"), Column("cpus", align="left"), Column("CPUs"), Column("memory"))


def _numa_table(hardware: dict[str, Any]) -> Table:
    nodes = hardware.get("numa_nodes") or []
    rows = tuple(
        (
            str(node.get("node")),
            _text(node.get("cpus")),
            _text(node.get("num_cpus")),
            _size(node.get("memory_bytes")),
        )
        for node in nodes
    )
    return Table("NUMA nodes", NUMA_COLUMNS, rows)


def _peak_text(peaks: dict[str, Any] | None) -> str:
    if peaks is None:
        return "not in the catalogue"
    tflops = peaks["peak_tflops"]
    shown = ", ".join(f"{p} {tflops[p]:g}" for p in ("fp32", "tf32", "bf16") if p in tflops)
    return f"{peaks['catalogue']}: {shown} TFLOP/s, {peaks['memory_bw_gbps']:g} GB/s"


GPU_COLUMNS = tuple(
    Column(name, align="left")
    for name in ("index", "name", "memory", "compute capability", "SMs", "driver", "peak")
)


def _gpu_table(report: EnvReport) -> Table:
    gpus = (report.facts.get("hardware") or {}).get("gpus") or []
    rows = tuple(
        (
            _text(gpu.get("index")),
            _text(gpu.get("name")),
            _size(gpu.get("memory_bytes")),
            _text(gpu.get("compute_capability")),
            _text(gpu.get("sm_count")),
            _text(gpu.get("driver")),
            _peak_text(peaks),
        )
        for gpu, peaks in zip(gpus, report.gpu_peaks, strict=True)
    )
    return Table("GPUs", GPU_COLUMNS, rows)


def _thread_rows(software: dict[str, Any], threads: dict[str, Any]) -> list[tuple[str, Any]]:
    runtime = software.get("runtime") or {}
    libraries = runtime.get("openmp_libraries")
    openmp = (
        None
        if libraries is None
        else "; ".join(f"{lib['runtime']} ({lib['path']})" for lib in libraries) or "none"
    )
    allocator = runtime.get("allocator") or {}
    alloc = allocator.get("name")
    if allocator.get("path"):
        alloc = f"{alloc} ({allocator['path']})"
    rows: list[tuple[str, Any]] = [(name, value) for name, value in sorted(threads.items())]
    if not rows:
        rows.append(("variables", "none set"))
    return [
        *rows,
        ("torch threads", runtime.get("torch_num_threads")),
        ("OpenMP runtimes loaded", openmp),
        ("allocator", alloc),
    ]


WARNING_COLUMNS = (
    Column("level", align="left", no_wrap=True),
    Column("code", align="left", no_wrap=True),
    Column("finding", align="left"),
)


def _warnings_table(warnings: list[EnvWarning]) -> Table:
    """One row each, a rule between them; the finding's evidence and remedy under it."""
    rows = tuple(
        (w.level, w.code, f"{w.message}\nevidence: {w.evidence}\nremedy: {w.remedy}")
        for w in warnings
    )
    bold: tuple[Style, ...] = ("", "", "bold")
    return Table(
        "Warnings", WARNING_COLUMNS, rows, groups=(1,) * len(rows), cell_styles=(bold,) * len(rows)
    )


def env_document(report: EnvReport) -> Document:
    """The facts of ``collect_environment()`` and the warnings found in them."""
    facts, warnings = report.facts, report.warnings
    software = facts.get("software") or {}
    hardware = facts.get("hardware") or {}
    gap = Line("")
    blocks: list[Block] = [_grid("Software / build", _software_rows(software)), gap]
    blocks.append(_grid("CPU and memory", _cpu_rows(hardware)))
    if hardware.get("numa_nodes"):
        blocks.append(_numa_table(hardware))
    blocks.append(gap)
    gpus = _gpu_table(report) if hardware.get("gpus") else None
    blocks += [gpus or Line("GPUs: none visible to torch", style="bold"), gap]
    threads = facts.get("threads") or {}
    blocks += [_grid("Threads and allocator", _thread_rows(software, threads)), gap]
    blocks.append(_warnings_table(warnings) if warnings else Line("Warnings: none", style="bold"))
    return Document("scalescope env", tuple(blocks))


def env_json(report: EnvReport) -> bytes:
    """The facts and warnings as JSON, schema version first."""
    facts = report.facts
    document = {
        "schema": ENV_SCHEMA,
        "software": facts.get("software") or {},
        "hardware": facts.get("hardware") or {},
        "gpu_peaks": list(report.gpu_peaks),
        "threads": facts.get("threads") or {},
        "warnings": msgspec.to_builtins(report.warnings),
    }
    return msgspec.json.format(msgspec.json.encode(document), indent=2) + b"\n"
