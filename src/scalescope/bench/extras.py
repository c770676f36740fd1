"""The ``run`` extra (``pip install 'scalescope[run]'``): torch, torchvision and
pytorch-optimizer, which launching, the probe and the built-in workloads import. A plain
``pip install scalescope`` leaves them out and still reads runs and traces; what needs them
asks here first, without importing them (torch alone takes seconds)."""

from __future__ import annotations

from importlib.util import find_spec

RUN_EXTRA = "pip install 'scalescope[run]'"

TORCH = ("torch",)
IMAGES = ("torch", "torchvision")
"""The data tools: torchvision's image folders and transforms."""
WORKLOADS = ("torch", "torchvision", "pytorch_optimizer")
"""The built-in workloads (bench, suite, and tune's or scale's ``--bench``): recipes' LARS."""

PACKAGES = {"pytorch_optimizer": "pytorch-optimizer"}
"""A module of the extra whose package pip names otherwise."""


def installed(module: str) -> bool:
    """Whether ``module`` can be found; a finder that refuses it counts as missing."""
    try:
        return find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing(modules: tuple[str, ...]) -> str | None:
    """The package name of the first of ``modules`` not installed; None when all are."""
    return next((PACKAGES.get(m, m) for m in modules if not installed(m)), None)
