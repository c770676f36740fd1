"""The probe's C++ side (native_*.cpp), built once per torch: process-group hooks where torch
has them, the c10d ops intercepted at the dispatcher where it has not.

A Python hook costs every collective several microseconds on this kind of machine: torch
builds Python objects for its arguments, and the probe's own work is Python too. The C++
side records the same row (op, bytes, dtype, group, sequence number, tag, issue and
completion time) and keeps the live state current without entering Python; the recorder
drains its rows at each flush (docs/probe.md, "Cost"). Its hooks serve a torch with
process-group hooks (2.14); its kernels at the dispatcher (native_dispatch.cpp) serve any
torch, the GPU machine's 2.11 included. Built beside a GPU (``torch.cuda.is_available()``) it
times collectives on a device with CUDA events (``SCALESCOPE_DEVICE_TIMING``); elsewhere that
part is compiled out and device collectives keep the Python path.

Ranks never compile: ``load`` imports the module only when it is built for this torch.
``ensure_built`` (the launcher, ``make``) compiles it once with torch's C++ extension
builder, a minute or two; without a compiler the probe keeps its Python path and says so
once. ``SCALESCOPE_NATIVE_HOOKS=0`` turns it off.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.machinery
import importlib.util
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).parent
SOURCES = tuple(
    HERE / name
    for name in ("native_module.cpp", "native_state.cpp", "native_hooks.cpp", "native_dispatch.cpp")
)
HEADERS = (HERE / "native_state.h",)
SWITCH = "SCALESCOPE_NATIVE_HOOKS"
CACHE_VARIABLE = "SCALESCOPE_CACHE"


def wanted() -> bool:
    return os.environ.get(SWITCH, "1") != "0"


def module_name() -> str:
    """Unique per torch version, source and flavour: a module built for another torch, or
    without the device timing this machine wants, never loads."""
    sha = hashlib.sha256()
    for path in (*SOURCES, *HEADERS):
        sha.update(path.read_bytes())
    version = re.sub(r"[^0-9a-zA-Z]", "_", _torch_version())
    flavour = "_cuda" if device_timing_wanted() else ""
    return f"scalescope_hooks_{version}_{sha.hexdigest()[:10]}{flavour}"


@functools.cache
def device_timing_wanted() -> bool:
    """Built here, the module times device collectives itself (CUDA events from C++): only
    where a GPU is there to run it (not verified on one yet: docs/probe.md)."""
    import torch

    return torch.cuda.is_available()


def hooks_available() -> bool:
    """This torch calls process-group hooks (torch 2.14 and later)."""
    import torch.distributed as dist

    return hasattr(getattr(dist, "ProcessGroup", None), "register_pre_hook")


def _torch_version() -> str:
    import torch  # here: the launcher refuses bad options before it imports torch

    return torch.__version__


def build_dir() -> Path:
    root = os.environ.get(CACHE_VARIABLE) or Path.home() / ".cache" / "scalescope"
    return Path(root) / "native" / module_name()


def built_file() -> Path:
    return build_dir() / f"{module_name()}.so"


_loaded: ModuleType | None = None


def load() -> ModuleType | None:
    """The built module, or None (not built for this torch, turned off, or broken)."""
    global _loaded
    if _loaded is not None or not wanted():
        return _loaded
    path = built_file()
    if not path.exists():
        return None
    try:
        loader = importlib.machinery.ExtensionFileLoader(module_name(), str(path))
        spec = importlib.util.spec_from_file_location(module_name(), path, loader=loader)
        if spec is None:
            return None
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
    except (ImportError, OSError):
        return None
    _loaded = module
    return module


def _failure_file() -> Path:
    return build_dir() / "failed.txt"


def defines() -> list[str]:
    flags = []
    if hooks_available():
        flags.append("-DSCALESCOPE_PG_HOOKS")
    if device_timing_wanted():
        flags.append("-DSCALESCOPE_DEVICE_TIMING")
    return flags


def build(verbose: bool = False) -> str | None:
    """Compile the module in this process; None, or why it could not be built."""
    from torch.utils import cpp_extension

    build_dir().mkdir(parents=True, exist_ok=True)
    bin_dir = str(Path(sys.executable).parent)  # the venv's ninja, unactivated
    os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
    try:
        cpp_extension.load(
            module_name(),
            [str(p) for p in SOURCES],
            extra_cflags=["-O2", *defines()],
            build_directory=str(build_dir()),
            verbose=verbose,
        )
    except Exception as exc:  # no compiler, no ninja, headers of another torch
        lines = [line for line in str(exc).splitlines() if line.strip()]
        return lines[0] if lines else type(exc).__name__
    return None


def fallback() -> str:
    """What records collectives when the module is missing."""
    return "its Python hooks" if hooks_available() else "its dist.* wrappers"


def ensure_built(say: Callable[[str], None] = lambda _text: None) -> str | None:
    """Build the module for this torch (in a child process) unless it is built, or failed
    before; None, or why the probe keeps its Python path (``say`` is told once)."""
    if not wanted() or built_file().exists():
        return None
    failure = _failure_file()
    if failure.exists():
        return failure.read_text().strip()
    say(f"building the probe's C++ hooks for torch {_torch_version()} (once, a minute or two)")
    done = subprocess.run(
        [sys.executable, "-m", "scalescope.probe.native"], capture_output=True, text=True
    )
    if done.returncode == 0 and built_file().exists():
        return None
    lines = [line for line in done.stderr.splitlines() if line.startswith("scalescope:")]
    problem = lines[-1].removeprefix("scalescope: ") if lines else f"exit code {done.returncode}"
    with contextlib.suppress(OSError):
        failure.parent.mkdir(parents=True, exist_ok=True)
        failure.write_text(problem + "\n")
    say(f"{problem}; the probe records through {fallback()}")
    return problem


def main() -> int:
    """Build (``make``, the launcher): exit 1 with the reason when it cannot."""
    if not wanted():
        print(f"scalescope: the probe's C++ hooks are off ({SWITCH}=0)")
        return 0
    problem = None if built_file().exists() else build(verbose="-v" in sys.argv)
    if problem:
        print(f"scalescope: the probe's C++ hooks were not built: {problem}", file=sys.stderr)
        return 1
    print(f"scalescope: the probe's C++ hooks: {built_file()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
