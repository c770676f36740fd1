"""Environment facts: consistent with psutil, os and /proc on this machine; parsers on samples."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec
import psutil
import torch

from scalescope.launch.machine import facts
from scalescope.launch.machine.build_info import (
    allocator,
    loaded_libraries,
    openmp_libraries,
    parse_build_config,
    parse_build_settings,
)
from scalescope.launch.machine.topology import parse_cpulist

X86_CONFIG = """PyTorch built with:
  - GCC 13.3
  - C++ Version: 202002
  - Intel(R) oneAPI Math Kernel Library Version 2024.2-Product Build 20240605 for Intel(R) 64 \
architecture applications
  - Intel(R) MKL-DNN v3.12.0 (Git Hash 80afa71049cd69a3df32adcccb623b12cd7baa22)
  - OpenMP 201511 (a.k.a. OpenMP 4.5)
  - LAPACK is enabled (usually provided by MKL)
  - CPU capability usage: AVX512
  - Build settings: BLAS_INFO=mkl, BUILD_TYPE=Release, CUDA_FLAGS= -Xfatbin -compress-all \
--diag_suppress=cc_clobber_ignored,--diag_suppress=bad_friend_decl, -DC10_NODEPRECATED, \
CUDA_VERSION=13.0, CUDNN_VERSION=9.24.0, LAPACK_INFO=mkl, TORCH_VERSION=2.14.1, USE_CUDA=1, \
USE_CUDNN=ON, USE_GLOO=ON, USE_MKL=ON, USE_MKLDNN=ON, USE_MPI=OFF, USE_NCCL=ON, USE_OPENMP=ON, \
USE_ROCM=OFF,
"""
"""Shape of torch 2.14's x86 CUDA wheel output (abridged)."""

ARM_CONFIG = """PyTorch built with:
  - GCC 11.2
  - C++ Version: 201703
  - oneDNN v3.5.3 (Git Hash 66f0cb9eb66affd2da3bf5f8d897376f04aae6af)
  - OpenMP 201511 (a.k.a. OpenMP 4.5)
  - LAPACK is enabled (usually provided by MKL)
  - CPU capability usage: SVE256
  - Build settings: BLAS_INFO=open, BUILD_TYPE=Release, LAPACK_INFO=open, USE_CUDA=OFF, \
USE_GLOO=ON, USE_MKL=OFF, USE_MKLDNN=ON, USE_MKLDNN_ACL=ON, USE_MPI=ON, USE_NCCL=0, \
USE_OPENMP=ON,
"""
"""An aarch64 build with OpenBLAS, oneDNN on the Arm Compute Library, and MPI."""

MAPS = """\
55d0c000-55d0d000 r--p 00000000 08:01 1 /usr/bin/python3.11
7f00a000-7f00b000 r-xp 00000000 08:01 2 /opt/venv/torch/lib/libgomp-a34b3233.so.1
7f00b000-7f00c000 r--p 00001000 08:01 2 /opt/venv/torch/lib/libgomp-a34b3233.so.1
7f00c000-7f00d000 r-xp 00000000 08:01 3 /opt/intel/lib/libiomp5.so
7f00d000-7f00e000 r-xp 00000000 08:01 4 /usr/lib/llvm/lib/libomptarget.so.17
7f00e000-7f00f000 r-xp 00000000 08:01 5 /usr/lib/libtcmalloc_minimal.so.4.5.9
7f00f000-7f010000 rw-p 00000000 00:00 0
7ffd0000-7ffd1000 rw-p 00000000 00:00 0 [stack]
"""


def test_parse_x86_config_sample():
    build = parse_build_config(X86_CONFIG)
    assert build["mkldnn_version"] == "3.12.0"
    assert build["mkl_version"] == "2024.2"
    assert build["openmp_version"] == "4.5 (201511)"
    assert build["cpu_capability_usage"] == "AVX512"
    assert build["compiler"] == "GCC 13.3"
    assert (build["blas"], build["lapack"]) == ("mkl", "mkl")
    assert build["use_mkldnn"] is True and build["use_openmp"] is True
    assert build["use_cuda"] is True and build["use_mpi"] is False
    assert build["cudnn_version"] == "9.24.0"
    assert build["use_mkldnn_acl"] is None  # not in the text: unknown, not False


def test_parse_arm_config_sample():
    build = parse_build_config(ARM_CONFIG)
    assert build["mkldnn_version"] == "3.5.3"
    assert build["mkl_version"] is None
    assert build["cpu_capability_usage"] == "SVE256"
    assert (build["blas"], build["lapack"]) == ("open", "open")
    assert build["use_mkldnn_acl"] is True and build["use_mpi"] is True
    assert build["use_nccl"] is False and build["use_mkl"] is False


def test_parse_empty_config_knows_nothing():
    assert all(value is None for value in parse_build_config("").values())


def test_build_settings_keep_values_with_commas_whole():
    settings = parse_build_settings("A=1, CUDA_FLAGS= -x,--y, -z, B=ON")
    assert settings == {"A": "1", "CUDA_FLAGS": "-x,--y, -z", "B": "ON"}


def test_libraries_from_maps_sample():
    paths = loaded_libraries(MAPS)
    assert paths[0] == "/opt/venv/torch/lib/libgomp-a34b3233.so.1"  # the binary is not a .so
    assert len(paths) == 4  # each library once, anonymous maps and [stack] skipped
    runtimes = [lib["runtime"] for lib in openmp_libraries(paths)]
    assert runtimes == ["libgomp", "libiomp5"]  # libomptarget is not libomp
    assert allocator(paths) == {"name": "tcmalloc", "path": "/usr/lib/libtcmalloc_minimal.so.4.5.9"}
    assert allocator(paths[:2])["name"] == "glibc"


def test_live_software_facts_match_torch():
    software = facts.software_facts()
    assert software["torch"] == str(torch.__version__)
    assert software["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert software["mkldnn"] == torch.backends.mkldnn.is_available()
    assert software["backends"]["gloo"] is True
    build = software["build"]
    parsed = parse_build_config(torch.__config__.show())
    assert {key: build[key] for key in parsed} == parsed
    if torch.backends.mkldnn.is_available():
        assert build["mkldnn_version"] and build["mkldnn_version"] in torch.__config__.show()
    if not torch.cuda.is_available():
        assert software["cudnn"] is None and software["nccl"] is None


def test_live_runtime_libraries_are_mapped_in_this_process():
    runtime = facts.software_facts()["runtime"]
    maps = Path("/proc/self/maps").read_text()
    for lib in runtime["openmp_libraries"]:
        assert lib["path"] in maps and Path(lib["path"]).exists()
    if torch.backends.openmp.is_available():
        assert runtime["openmp_libraries"], "torch uses OpenMP, so a runtime must be mapped"
    assert runtime["allocator"]["name"] in ("glibc", "tcmalloc", "jemalloc", "mimalloc")
    assert runtime["torch_num_threads"] == torch.get_num_threads()


def test_live_hardware_facts_match_psutil_and_proc():
    hardware = facts.hardware_facts()
    assert hardware["logical_cores"] == psutil.cpu_count(logical=True) == os.cpu_count()
    assert hardware["physical_cores"] == psutil.cpu_count(logical=False)
    assert hardware["hyperthreading"] == (hardware["logical_cores"] > hardware["physical_cores"])
    assert hardware["usable_cores"] == len(os.sched_getaffinity(0))
    assert 1 <= hardware["sockets"] <= hardware["physical_cores"]
    assert hardware["memory_bytes"] == psutil.virtual_memory().total
    if not torch.cuda.is_available():
        assert hardware["gpus"] == []


def test_live_isa_flags_are_the_cpuinfo_flags():
    text = Path("/proc/cpuinfo").read_text()
    line = next(ln for ln in text.splitlines() if ln.split(":")[0].strip() in ("flags", "Features"))
    present = set(line.split(":", 1)[1].split())
    assert facts.hardware_facts()["isa_flags"] == [f for f in facts.ISA_FLAGS if f in present]


def test_live_numa_nodes_cover_the_online_cpus():
    nodes = facts.hardware_facts()["numa_nodes"]
    if not Path("/sys/devices/system/node/node0").exists():
        assert nodes == []
        return
    online = parse_cpulist(Path("/sys/devices/system/cpu/online").read_text())
    covered = [cpu for node in nodes for cpu in parse_cpulist(node["cpus"])]
    assert tuple(sorted(covered)) == online
    assert sum(node["num_cpus"] for node in nodes) == len(online)
    memory = [node["memory_bytes"] for node in nodes if node["num_cpus"]]
    assert all(m and m > 0 for m in memory)
    assert sum(memory) <= psutil.virtual_memory().total * 1.05


def test_thread_facts_are_the_variables_set(monkeypatch):
    for name in facts.THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    monkeypatch.setenv("OMP_PROC_BIND", "close")
    assert facts.thread_facts() == {"OMP_NUM_THREADS": "4", "OMP_PROC_BIND": "close"}


def test_collect_environment_is_json_able():
    environment = facts.collect_environment()
    assert set(environment) == {"software", "hardware", "threads"}
    assert msgspec.json.decode(msgspec.json.encode(environment)) == environment


def test_cpu_mhz_prefers_cpufreq_then_cpuinfo(tmp_path):
    freq = tmp_path / "cpu0" / "cpufreq"
    freq.mkdir(parents=True)
    cpuinfo = "processor\t: 0\ncpu MHz\t\t: 2100.000\n"
    assert facts.cpu_mhz(tmp_path, cpuinfo) == 2100.0
    (freq / "cpuinfo_max_freq").write_text("3500000\n")
    assert facts.cpu_mhz(tmp_path, cpuinfo) == 3500.0
    assert facts.cpu_mhz(tmp_path / "none", "no clock here") is None


def test_nvidia_driver_version_from_proc_text():
    from scalescope.launch.machine.facts import nvidia_driver_version

    text = (
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n"
        "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"
    )
    assert nvidia_driver_version(text) == "535.104.05"
    assert (
        nvidia_driver_version(
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release Build\n"
        )
        == "570.86.15"
    )
    assert nvidia_driver_version("") is None
