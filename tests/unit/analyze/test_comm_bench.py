"""Bus factors against nccl-tests' definitions, rows from raw times, backend ratios, fits."""

from __future__ import annotations

import pytest

from scalescope.analyze.comm.comm_bench import comm_results, op_bus_factor

# nccl-tests src/*.cu, GetBw: busBw = algBw * factor
NCCL_TESTS = {
    "all_reduce": lambda n: 2.0 * (n - 1) / n,  # all_reduce.cu
    "all_gather": lambda n: (n - 1) / n,  # all_gather.cu
    "reduce_scatter": lambda n: (n - 1) / n,  # reduce_scatter.cu
    "all_to_all": lambda n: (n - 1) / n,  # alltoall.cu
    "broadcast": lambda n: 1.0,  # broadcast.cu
    "sendrecv": lambda n: 1.0,  # sendrecv.cu
}


@pytest.mark.parametrize("op", sorted(NCCL_TESTS))
@pytest.mark.parametrize("n", [1, 2, 3, 4, 8, 128])
def test_bus_factors_are_nccl_tests(op, n):
    assert op_bus_factor(op, n) == pytest.approx(NCCL_TESTS[op](n))


def raw(measurements, n=4):
    return {
        "world_size": n,
        "dtype": "float32",
        "iters": 2,
        "warmup": 1,
        "measurements": measurements,
    }


def test_rows_ratios_and_fits_from_raw_times():
    m = []
    for backend, scale in (("gloo", 1.0), ("mpi", 2.0)):
        for nbytes in (1000, 1_000_000):
            t = (10e-6 + nbytes * 1e-9) * scale  # α = 10 µs, 1 GB/s
            m.append({"backend": backend, "op": "all_reduce", "nbytes": nbytes,
                      "count": nbytes // 4, "times_s": [t * 0.5, t * 1.5]})  # fmt: skip
    m.append({"backend": "gloo", "op": "sendrecv", "nbytes": 8, "count": 2, "error": "boom"})
    bench = comm_results(raw(m), {"nccl": "no CUDA device"})
    big = next(r for r in bench.rows if r.backend == "gloo" and r.nbytes == 1_000_000)
    assert big.time_avg_us == pytest.approx(1010.0)
    assert big.time_min_us == pytest.approx(505.0) and big.time_max_us == pytest.approx(1515.0)
    assert big.algbw_gbps == pytest.approx(1e6 / 1010e-6 / 1e9)
    assert big.busbw_gbps == pytest.approx(big.algbw_gbps * 1.5)
    assert big.redop == "sum" and big.root == -1 and big.iters == 2
    assert [r.time_ratio for r in bench.ratios] == pytest.approx([2.0, 2.0])
    assert [r.busbw_ratio for r in bench.ratios] == pytest.approx([0.5, 0.5])
    fit = next(f for f in bench.fits if f.backend == "gloo")
    assert fit.alpha_s == pytest.approx(10e-6) and fit.beta_s_per_byte == pytest.approx(1e-9)
    assert bench.failures[0].error == "boom" and bench.unavailable == {"nccl": "no CUDA device"}
