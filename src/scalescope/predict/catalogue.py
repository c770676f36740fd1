"""The hardware catalogue: targets of ``scalescope project --hardware`` as data (TOML).

``hardware/catalogue.toml`` ships with the package; ``--hardware FILE.toml`` reads one table
of the same shape. Every figure is per device (a CPU socket or a GPU) and carries its source.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

CATALOGUE = "hardware/catalogue.toml"
KINDS = ("cpu", "gpu")


@dataclass(frozen=True, kw_only=True)
class Link:
    """One kind of link a ring step crosses: time of m bytes = alpha_s + m / bandwidth."""

    name: str
    alpha_s: float
    bandwidth_bytes_per_s: float
    source: str = ""

    @property
    def beta_s_per_byte(self) -> float:
        return 1.0 / self.bandwidth_bytes_per_s


@dataclass(frozen=True, kw_only=True)
class Hardware:
    key: str
    name: str
    kind: str
    """cpu or gpu."""
    devices_per_node: int
    cores: int
    """Per device (GPUs: streaming multiprocessors)."""
    numa_domains: int
    memory_bytes: float
    """Per device."""
    memory_bw_bytes_per_s: float
    peak_flops: dict[str, float]
    """Per device, by precision (fp64, fp32, tf32, bf16, fp16), FLOP/s."""
    interconnect: Link
    intra_node: Link
    source: str

    def peak(self, precision: str) -> tuple[float, str]:
        """The peak of ``precision``, or fp32's when the device has no units for it."""
        if precision in self.peak_flops:
            return self.peak_flops[precision], precision
        return self.peak_flops["fp32"], "fp32"

    @property
    def default_ranks_per_node(self) -> int:
        """One rank per GPU, or per NUMA domain on CPUs."""
        per_device = 1 if self.kind == "gpu" else self.numa_domains
        return self.devices_per_node * per_device


def _number(table: dict[str, Any], key: str, where: str) -> float:
    value = table.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ValueError(f"{where}: {key} must be a positive number, got {value!r}")
    return float(value)


def _link(table: Any, where: str) -> Link:
    if not isinstance(table, dict):
        raise ValueError(f"{where}: missing table")
    return Link(
        name=str(table.get("name", "")),
        alpha_s=_number(table, "alpha_us", where) * 1e-6,
        bandwidth_bytes_per_s=_number(table, "bandwidth_gbps", where) * 1e9,
        source=str(table.get("source", "")),
    )


def parse_hardware(key: str, table: dict[str, Any], where: str) -> Hardware:
    """One catalogue table as a Hardware; a missing or bad field is a ValueError naming it."""
    kind = table.get("kind")
    if kind not in KINDS:
        raise ValueError(f"{where}: kind must be cpu or gpu, got {kind!r}")
    peaks = table.get("peak_tflops")
    if not isinstance(peaks, dict) or "fp32" not in peaks:
        raise ValueError(f"{where}: peak_tflops needs at least fp32")
    return Hardware(
        key=key,
        name=str(table.get("name", key)),
        kind=kind,
        devices_per_node=int(_number(table, "devices_per_node", where)),
        cores=int(_number(table, "cores", where)),
        numa_domains=int(_number(table, "numa_domains", where)),
        memory_bytes=_number(table, "memory_gb", where) * 1e9,
        memory_bw_bytes_per_s=_number(table, "memory_bw_gbps", where) * 1e9,
        peak_flops={p: _number(peaks, p, f"{where}.peak_tflops") * 1e12 for p in peaks},
        interconnect=_link(table.get("interconnect"), f"{where}.interconnect"),
        intra_node=_link(table.get("intra_node"), f"{where}.intra_node"),
        source=str(table.get("source", "")),
    )


def _read_toml(text: str, where: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{where}: not valid TOML ({exc})") from exc


def catalogue() -> dict[str, Hardware]:
    """Every target shipped with scalescope, by name."""
    text = resources.files("scalescope.predict").joinpath(CATALOGUE).read_text("utf-8")
    doc = _read_toml(text, CATALOGUE)
    return {key: parse_hardware(key, table, f"{CATALOGUE} [{key}]") for key, table in doc.items()}


def load_hardware(name_or_path: str) -> Hardware:
    """A catalogue name (a64fx, v100, ...) or a TOML file with one table of the same shape."""
    known = catalogue()
    if name_or_path in known:
        return known[name_or_path]
    path = Path(name_or_path)
    if path.suffix != ".toml":
        names = ", ".join(known)
        raise ValueError(f"unknown hardware {name_or_path!r}: use one of {names} or a .toml file")
    try:
        doc = _read_toml(path.read_text("utf-8"), str(path))
    except OSError as exc:
        raise ValueError(f"{path}: cannot read ({exc.strerror})") from exc
    tables = [(k, v) for k, v in doc.items() if isinstance(v, dict)]
    if len(tables) != 1:
        raise ValueError(f"{path}: needs exactly one hardware table, found {len(tables)}")
    key, table = tables[0]
    return parse_hardware(key, table, f"{path} [{key}]")


def match_gpu(device_name: str) -> Hardware | None:
    """The catalogue GPU a device name is (``NVIDIA H100 80GB HBM3`` -> h100), or None."""
    words = set(re.split(r"[^a-z0-9]+", device_name.lower()))
    found = [hw for key, hw in catalogue().items() if hw.kind == "gpu" and key in words]
    return found[0] if len(found) == 1 else None


def gpu_peaks(name: str | None) -> dict[str, Any] | None:
    """The catalogue's peak figures of the GPU model ``name`` is (docs/project.md), or None:
    what `env` shows beside each GPU."""
    hw = match_gpu(name or "")
    if hw is None:
        return None
    return {
        "catalogue": hw.key,
        "peak_tflops": {p: flops / 1e12 for p, flops in hw.peak_flops.items()},
        "memory_bw_gbps": hw.memory_bw_bytes_per_s / 1e9,
    }
