"""``scalescope env`` views: the terminal tables and the JSON document."""

from __future__ import annotations

import dataclasses
import io

import msgspec
import pytest
from rich.console import Console

from scalescope.diagnose.env_checks import EnvWarning, check_environment
from scalescope.launch.machine.facts import collect_environment
from scalescope.predict.catalogue import gpu_peaks
from scalescope.report.media.terminal import render_document
from scalescope.report.renderers import render
from scalescope.report.subjects import EnvReport
from scalescope.report.views.env import ENV_SCHEMA, env_json

FACTS = {
    "software": {
        "python": "3.11.7",
        "torch": "2.14.1",
        "torch_git": "5c4886908584029761b579af026dcfb627c84070",
        "cuda": "13.0",
        "cuda_available": True,
        "mkldnn": True,
        "cpu_capability": "AVX512",
        "backends": {"gloo": True, "nccl": True, "mpi": False},
        "cudnn": 92400,
        "nccl": "2.27.3",
        "build": {
            "blas": "mkl",
            "lapack": "mkl",
            "mkldnn_version": "3.12.0",
            "openmp_version": "4.5 (201511)",
            "cpu_capability_usage": "AVX512",
        },
        "runtime": {
            "openmp_libraries": [{"runtime": "libgomp", "path": "/torch/lib/libgomp.so.1"}],
            "allocator": {"name": "glibc", "path": None},
            "torch_num_threads": 24,
        },
    },
    "hardware": {
        "hostname": "node-7",
        "machine": "x86_64",
        "cpu_model": "Intel(R) Xeon(R) Platinum 8480+",
        "isa_flags": ["avx2", "fma", "avx512f", "amx_bf16"],
        "sockets": 2,
        "logical_cores": 224,
        "physical_cores": 112,
        "usable_cores": 224,
        "threads_per_core": 2,
        "hyperthreading": True,
        "memory_bytes": 512 << 30,
        "numa_nodes": [
            {"node": 0, "cpus": "0-55,112-167", "num_cpus": 112, "memory_bytes": 256 << 30},
            {"node": 1, "cpus": "56-111,168-223", "num_cpus": 112, "memory_bytes": 256 << 30},
        ],
        "gpus": [
            {
                "index": 0,
                "name": "NVIDIA H100 80GB HBM3",
                "memory_bytes": 80 << 30,
                "compute_capability": "9.0",
                "sm_count": 132,
                "driver": "570.86.15",
            }
        ],
    },
    "threads": {"OMP_NUM_THREADS": "56"},
}


def _report(facts: dict, warnings: list[EnvWarning]) -> EnvReport:
    """As `env` gathers it: the catalogue's peaks of each GPU beside the facts."""
    gpus = (facts.get("hardware") or {}).get("gpus") or []
    peaks = tuple(gpu_peaks(g.get("name")) for g in gpus)
    return EnvReport(facts=facts, warnings=warnings, gpu_peaks=peaks)


def _render(facts: dict, warnings: list[EnvWarning]) -> str:
    console = Console(file=io.StringIO(), width=140, color_system=None)
    render_document(render(_report(facts, warnings), "terminal"), console)
    return console.file.getvalue()


def _line_with(text: str, *needles: str) -> str:
    for line in text.splitlines():
        if all(n in line for n in needles):
            return line
    raise AssertionError(f"no line with {needles!r} in:\n{text}")


def _warnings() -> list[EnvWarning]:
    return check_environment(**FACTS, nproc_per_node=2)


def test_sections_and_facts_are_shown():
    text = _render(FACTS, _warnings())
    for title in ("Software / build", "CPU and memory", "NUMA nodes", "GPUs"):
        assert title in text
    assert "Threads and allocator" in text and "Warnings" in text
    _line_with(text, "BLAS / LAPACK", "mkl / mkl")
    _line_with(text, "oneDNN", "3.12.0")
    _line_with(text, "CPU capability", "AVX512")
    _line_with(text, "NCCL", "2.27.3")
    _line_with(text, "distributed backends", "gloo, nccl", "not: mpi")
    _line_with(text, "cores", "112 physical", "224 logical")
    _line_with(text, "1", "56-111,168-223", "112", "256.00 GiB")
    _line_with(text, "NVIDIA H100 80GB HBM3", "80.00 GiB", "9.0")
    _line_with(text, "OMP_NUM_THREADS", "56")
    _line_with(text, "OpenMP runtimes loaded", "libgomp")
    _line_with(text, "allocator", "glibc")


def test_each_warning_is_shown_with_evidence_and_remedy():
    warnings = _warnings()
    codes = [w.code for w in warnings]
    assert {"HYPERTHREADING", "DEFAULT_ALLOCATOR", "NUMA_UNBOUND", "NO_MPI"} <= set(codes)
    text = _render(FACTS, warnings)
    flat = " ".join(text.split())
    for warning in warnings:
        _line_with(text, warning.level, warning.code)
        assert " ".join(f"evidence: {warning.evidence}".split())[:60] in flat
        assert "remedy:" in flat


def test_empty_facts_and_no_warnings_render():
    text = _render({"software": {}, "hardware": {}, "threads": {}}, [])
    assert "Warnings: none" in text
    assert "GPUs: none visible to torch" in text
    _line_with(text, "variables", "none set")
    _line_with(text, "python", "n/a")


def test_json_round_trip():
    warnings = _warnings()
    document = msgspec.json.decode(env_json(_report(FACTS, warnings)))
    assert document["schema"] == ENV_SCHEMA == "scalescope.env/1"
    assert list(document) == ["schema", "software", "hardware", "gpu_peaks", "threads", "warnings"]
    for key in ("software", "hardware", "threads"):
        assert document[key] == FACTS[key]
    assert document["warnings"] == [dataclasses.asdict(w) for w in warnings]
    assert [EnvWarning(**w) for w in document["warnings"]] == warnings


def test_live_environment_renders():
    environment = collect_environment()
    warnings = check_environment(**environment)
    assert "Software / build" in _render(environment, warnings)
    assert (
        msgspec.json.decode(env_json(_report(environment, warnings)))["threads"]
        == environment["threads"]
    )


def test_gpu_row_names_driver_sms_and_the_catalogue_peaks():
    text = _render(FACTS, [])
    flat = " ".join(text.split())
    assert "570.86.15" in flat and "132" in flat
    # the H100 of the catalogue (predict/hardware/catalogue.toml): 67 fp32, 989.4 bf16 TFLOP/s
    assert "h100: fp32 67, tf32 494.7, bf16 989.4 TFLOP/s" in flat and "3350" in flat
    (peaks,) = msgspec.json.decode(env_json(_report(FACTS, [])))["gpu_peaks"]
    assert peaks["catalogue"] == "h100" and peaks["peak_tflops"]["fp32"] == 67.0
    assert peaks["memory_bw_gbps"] == 3350.0


def test_gpu_outside_the_catalogue_says_so():
    facts = {**FACTS, "hardware": {**FACTS["hardware"], "gpus": [{"index": 0, "name": "RTX 9999"}]}}
    assert "not in the catalogue" in " ".join(_render(facts, []).split())
    assert msgspec.json.decode(env_json(_report(facts, [])))["gpu_peaks"] == [None]


def test_a_report_without_the_peaks_of_its_gpus_is_refused():
    with pytest.raises(ValueError, match=r"^EnvReport: 1 GPUs in the facts, 0 peaks$"):
        EnvReport(facts=FACTS, warnings=[])
