from pathlib import Path

import pytest
import tomllib

from scalescope.predict.catalogue import catalogue, load_hardware

ROOT = Path(__file__).parents[3]
NAMES = ("a64fx", "xeon-8380", "epyc-7763", "v100", "a100", "h100")


def test_catalogue_has_every_target_with_sources():
    known = catalogue()
    assert set(NAMES) <= set(known)
    for hw in known.values():
        assert hw.source and hw.interconnect.source and hw.intra_node.source
        assert hw.peak_flops["fp32"] > 0 and hw.memory_bw_bytes_per_s > 0


def test_figures_match_the_prior_art_table():
    a64fx, v100 = load_hardware("a64fx"), load_hardware("v100")
    assert a64fx.peak_flops["fp32"] == 5.4e12 and a64fx.peak_flops["fp64"] == 2.7e12
    assert (a64fx.memory_bytes, a64fx.memory_bw_bytes_per_s) == (32e9, 1024e9)
    assert (a64fx.cores, a64fx.numa_domains, a64fx.default_ranks_per_node) == (48, 4, 4)
    assert v100.peak_flops["fp32"] == 15.7e12 and v100.memory_bw_bytes_per_s == 900e9
    assert v100.default_ranks_per_node == 8


def test_cpu_peaks_follow_cores_clock_and_vector_width():
    # 40 cores x 2.3 GHz x 64 (AVX-512, 2 FMA); 64 cores x 2.45 GHz x 32 (AVX2, 2 FMA)
    assert load_hardware("xeon-8380").peak_flops["fp32"] == pytest.approx(40 * 2.3e9 * 64, 1e-3)
    assert load_hardware("epyc-7763").peak_flops["fp32"] == pytest.approx(64 * 2.45e9 * 32, 1e-3)


def test_missing_precision_falls_back_to_fp32():
    assert load_hardware("xeon-8380").peak("bf16") == (5.89e12, "fp32")
    assert load_hardware("a100").peak("bf16") == (312e12, "bf16")


def test_the_catalogue_ships_as_package_data():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    data = pyproject["tool"]["setuptools"]["package-data"]["scalescope.predict"]
    assert "hardware/*.toml" in data
    assert (ROOT / "src/scalescope/predict/hardware/catalogue.toml").is_file()


def test_a_file_of_one_table(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text(
        '[box]\nkind = "cpu"\ndevices_per_node = 1\ncores = 8\nnuma_domains = 1\n'
        "memory_gb = 64\nmemory_bw_gbps = 50\npeak_tflops = { fp32 = 1.0 }\n"
        "interconnect = { alpha_us = 2, bandwidth_gbps = 10 }\n"
        "intra_node = { alpha_us = 0.5, bandwidth_gbps = 20 }\n"
    )
    hw = load_hardware(str(path))
    assert (hw.key, hw.cores, hw.peak_flops["fp32"]) == ("box", 8, 1e12)
    assert hw.interconnect.alpha_s == pytest.approx(2e-6)
    assert hw.interconnect.beta_s_per_byte == pytest.approx(1e-10)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[box\n", "not valid TOML"),
        ('[a]\nkind = "cpu"\n[b]\nkind = "gpu"\n', "exactly one hardware table"),
        ('[box]\nkind = "tpu"\n', "kind must be cpu or gpu"),
        ('[box]\nkind = "cpu"\npeak_tflops = { fp16 = 1 }\n', "needs at least fp32"),
        ('[box]\nkind = "cpu"\npeak_tflops = { fp32 = 1 }\ncores = -1\n', "devices_per_node"),
    ],
)
def test_bad_files(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        load_hardware(str(path))


def test_unknown_names_and_missing_files(tmp_path):
    with pytest.raises(ValueError, match="unknown hardware 'tpu-v9'.*a64fx"):
        load_hardware("tpu-v9")
    with pytest.raises(ValueError, match="cannot read"):
        load_hardware(str(tmp_path / "none.toml"))


def test_match_gpu_by_device_name():
    from scalescope.predict.catalogue import match_gpu

    assert match_gpu("NVIDIA H100 80GB HBM3").key == "h100"
    assert match_gpu("NVIDIA A100-SXM4-80GB").key == "a100"
    assert match_gpu("Tesla V100-SXM2-32GB").key == "v100"
    assert match_gpu("NVIDIA GeForce RTX 4090") is None
    assert match_gpu("") is None


def test_h200_has_the_h100s_compute_and_its_own_memory():
    from scalescope.predict.catalogue import catalogue, match_gpu

    h100, h200 = catalogue()["h100"], catalogue()["h200"]
    assert h200.peak_flops == h100.peak_flops
    assert h200.memory_bytes == 141e9 and h200.memory_bw_bytes_per_s == 4.8e12
    assert match_gpu("NVIDIA H200").key == "h200"
