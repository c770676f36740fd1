"""Measured fp32 matrix-multiply rate of one core: the peak FLOP/s that the diagnosis
compares a run's compute with.

A peak from the nominal clock misleads wherever the real clock differs from it: turbo
(virtual machines report the nominal clock only), AVX-512 frequency licences, one FMA
unit instead of two. One thread multiplying 512 x 512 matrices through torch's own BLAS
measures what the cores really do with the build really installed, in about 0.2 s. The best
of several timed calls is kept, so a neighbour that steals the core now and then lowers
the measurement less than a mean would.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

GEMM_SIZE = 512
GEMM_SECONDS = 0.2


@contextmanager
def _one_thread() -> Iterator[None]:
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def gemm_gflops_per_core(size: int = GEMM_SIZE, seconds: float = GEMM_SECONDS) -> float | None:
    """Best fp32 GEMM rate of one thread in GFLOP/s, or None when torch cannot run it."""
    try:
        import torch
    except ImportError:
        return None
    a, b = torch.randn(size, size), torch.randn(size, size)
    out = torch.empty(size, size)
    best = float("inf")
    with _one_thread():
        torch.mm(a, b, out=out)
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            start = time.perf_counter()
            torch.mm(a, b, out=out)
            best = min(best, time.perf_counter() - start)
    return 2.0 * size**3 / best / 1e9
