"""How torch was built and which native runtimes this process loaded.

``parse_build_config`` reads the text of ``torch.__config__.show()``; ``loaded_libraries``
reads ``/proc/self/maps``. Both are pure parsers over text so tests can feed them samples;
``build_facts`` and ``runtime_facts`` call them on the live process.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any

SETTINGS: dict[str, str] = {
    "BLAS_INFO": "blas",
    "LAPACK_INFO": "lapack",
    "BUILD_TYPE": "build_type",
    "CUDA_VERSION": "cuda_version",
    "CUDNN_VERSION": "cudnn_version",
    "USE_MKL": "use_mkl",
    "USE_MKLDNN": "use_mkldnn",
    "USE_MKLDNN_ACL": "use_mkldnn_acl",
    "USE_OPENMP": "use_openmp",
    "USE_CUDA": "use_cuda",
    "USE_CUDNN": "use_cudnn",
    "USE_NCCL": "use_nccl",
    "USE_GLOO": "use_gloo",
    "USE_MPI": "use_mpi",
    "USE_ROCM": "use_rocm",
}
"""Build settings kept from the ``Build settings:`` line, and the key each becomes."""

PATTERNS: dict[str, re.Pattern[str]] = {
    "mkldnn_version": re.compile(r"(?:MKL-DNN|oneDNN)\s+v?(\d+(?:\.\d+)+)"),
    "mkl_version": re.compile(r"Math Kernel Library Version (\d[\w.]*)"),
    "openmp_version": re.compile(r"OpenMP (\d+)(?: \(a\.k\.a\. OpenMP ([\d.]+)\))?"),
    "cpu_capability_usage": re.compile(r"CPU capability usage: (\S+)"),
    "compiler": re.compile(r"PyTorch built with:\s*\n\s*- ([^\n]+)"),
}
"""Facts read from the free-text lines of ``torch.__config__.show()``."""

_SETTING = re.compile(r"^([A-Z][A-Z0-9_]*)=(.*)$")
_OPENMP_LIB = re.compile(r"^(libgomp|libiomp5|libomp)(?:[-.]|$)")
_ALLOCATOR_LIB = re.compile(r"^lib(tcmalloc|jemalloc|mimalloc)")


def _as_bool(value: str) -> bool | str:
    upper = value.strip().upper()
    if upper in ("ON", "1", "TRUE", "YES"):
        return True
    if upper in ("OFF", "0", "FALSE", "NO", ""):
        return False
    return value


def parse_build_settings(line: str) -> dict[str, str]:
    """``KEY=VALUE, KEY=VALUE`` -> dict; a piece without ``KEY=`` continues the last value."""
    settings: dict[str, str] = {}
    last = ""
    for piece in line.split(", "):
        match = _SETTING.match(piece.strip())
        if match:
            last = match.group(1)
            settings[last] = match.group(2).strip()
        elif last:
            settings[last] += ", " + piece
    return settings


def _free_text_facts(text: str) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    for key, pattern in PATTERNS.items():
        match = pattern.search(text)
        facts[key] = match.group(1).strip() if match else None
    openmp = PATTERNS["openmp_version"].search(text)
    if openmp and openmp.group(2):
        facts["openmp_version"] = f"{openmp.group(2)} ({openmp.group(1)})"
    return facts


def parse_build_config(text: str) -> dict[str, Any]:
    """Facts of a ``torch.__config__.show()`` text; a fact the text lacks is ``None``."""
    facts = _free_text_facts(text)
    match = re.search(r"Build settings: (.*)", text)
    settings = parse_build_settings(match.group(1)) if match else {}
    for raw, key in SETTINGS.items():
        value = settings.get(raw)
        if value is None:
            facts[key] = None
        else:
            facts[key] = _as_bool(value) if key.startswith("use_") else value
    return facts


def parse_parallel_backend(text: str) -> str | None:
    """``ATen parallel backend: OpenMP`` from ``torch.__config__.parallel_info()``."""
    match = re.search(r"ATen parallel backend: (.+)", text)
    return match.group(1).strip() if match else None


def build_facts() -> dict[str, Any]:
    """The build of the torch in this process (see ``parse_build_config``)."""
    import torch

    facts = parse_build_config(torch.__config__.show())
    try:
        facts["parallel_backend"] = parse_parallel_backend(torch.__config__.parallel_info())
    except RuntimeError:
        facts["parallel_backend"] = None
    return facts


def cuda_facts() -> dict[str, Any]:
    """cuDNN and NCCL versions; ``None`` where CUDA, cuDNN or NCCL is absent."""
    import torch

    facts: dict[str, Any] = {"cudnn": None, "nccl": None}
    if not torch.cuda.is_available():
        return facts
    with contextlib.suppress(RuntimeError, AttributeError):
        facts["cudnn"] = torch.backends.cudnn.version()
    with contextlib.suppress(RuntimeError, AttributeError, ImportError):
        version = torch.cuda.nccl.version()
        facts["nccl"] = ".".join(map(str, version)) if isinstance(version, tuple) else version
    return facts


def loaded_libraries(maps_text: str) -> list[str]:
    """Paths of the shared objects mapped in a ``/proc/PID/maps`` text, in first-seen order."""
    seen: dict[str, None] = {}
    for line in maps_text.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5].startswith("/") and ".so" in fields[5]:
            seen.setdefault(fields[5].strip(), None)
    return list(seen)


def openmp_libraries(paths: list[str]) -> list[dict[str, str]]:
    """Each OpenMP runtime mapped: ``{"runtime": "libgomp", "path": ...}``."""
    found = []
    for path in paths:
        match = _OPENMP_LIB.match(Path(path).name)
        if match:
            found.append({"runtime": match.group(1), "path": path})
    return found


def allocator(paths: list[str]) -> dict[str, str | None]:
    """The malloc replacement mapped (tcmalloc, jemalloc, mimalloc) or glibc's default."""
    for path in paths:
        match = _ALLOCATOR_LIB.match(Path(path).name)
        if match:
            return {"name": match.group(1), "path": path}
    return {"name": "glibc", "path": None}


def runtime_facts(maps_path: Path = Path("/proc/self/maps")) -> dict[str, Any]:
    """OpenMP runtimes and allocator loaded in this process (torch's among them: imported
    first), and torch's thread count."""
    import torch

    try:
        paths = loaded_libraries(maps_path.read_text())
    except OSError:
        paths = None
    return {
        "openmp_libraries": None if paths is None else openmp_libraries(paths),
        "allocator": None if paths is None else allocator(paths),
        "torch_num_threads": torch.get_num_threads(),
    }
