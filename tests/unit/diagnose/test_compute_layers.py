"""The compute remedies follow the model's layers: convolution advice for convolutions,
attention advice for attention, today's list when the layers were not recorded."""

from __future__ import annotations

import dataclasses

import msgspec
from diagnose_inputs import HARDWARE, analysis, good_ranks, make_input, rank_steps, run_meta

from scalescope.diagnose import diagnose
from scalescope.diagnose.findings import Finding
from scalescope.diagnose.rules_compute import ComputeRule
from scalescope.events.run import RankMeta
from scalescope.tune.seeds import seeds, skipped_knobs
from scalescope.tune.space import SpaceContext, parse_space

COMPUTE = {"forward": 30.0, "backward": 55.0, "optimizer": 5.0}
GPT = {"attention": 33.3, "linear": 44.4, "embedding": 20.1, "normalization": 0.2, "other": 2.0}
RESNET = {"convolution": 93.4, "linear": 4.5, "normalization": 2.1}
AMX = [*HARDWARE["isa_flags"], "avx512_bf16", "amx_tile", "amx_bf16"]
NHWC_WORDS = ("channels_last", "channels-last", "NHWC", "convolution")


def compute_finding(shares: dict[str, float] | None, isa: list[str] | None = None) -> Finding:
    ranks = {
        r: msgspec.structs.replace(m, layer_shares=shares if r == 1 else None)
        for r, m in good_ranks().items()
    }  # only rank 1 recorded them: any rank's record counts
    meta = run_meta(hardware={**HARDWARE, "isa_flags": isa or HARDWARE["isa_flags"]})
    a = analysis([rank_steps(r, data=2.0, **COMPUTE) for r in (0, 1)])
    finding = ComputeRule().evaluate(make_input(a, meta=meta, ranks=ranks))
    assert finding is not None and finding.code == "COMPUTE"
    return finding


def mentions(finding: Finding, *words: str) -> list[str]:
    return [r for r in finding.remedies if any(w.lower() in r.lower() for w in words)]


def test_a_transformer_gets_attention_advice_and_no_nhwc() -> None:
    f = compute_finding(GPT, AMX)
    assert mentions(f, *NHWC_WORDS) == []
    (sdpa,) = mentions(f, "scaled_dot_product_attention")
    assert "applies to attention 33 % of the parameters" in sdpa
    (bf16,) = mentions(f, "torch.bfloat16")
    assert "avx512_bf16, amx_bf16" in bf16
    assert "applies to attention 33 %, linear layers 44 % of the parameters" in bf16
    (compile_,) = mentions(f, "torch.compile")
    assert "matrix multiplications" in compile_


def test_bf16_only_where_the_cpu_has_it() -> None:
    assert mentions(compute_finding(GPT), "bfloat16") == []  # AVX-512 without BF16


def test_a_cnn_still_gets_channels_last_for_its_convolutions() -> None:
    f = compute_finding(RESNET)
    (nhwc,) = mentions(f, "channels_last")
    assert "NHWC" in nhwc and "applies to convolutions 93 % of the parameters" in nhwc
    assert mentions(f, "scaled_dot_product_attention") == []
    (compile_,) = mentions(f, "torch.compile")
    assert "into the convolutions" in compile_


def test_a_small_convolution_is_still_named_with_its_share() -> None:
    (nhwc,) = mentions(compute_finding({"convolution": 0.4, "attention": 99.6}), "channels_last")
    assert "convolutions 0.4 %" in nhwc


def test_unknown_layers_keep_the_whole_list_unchanged() -> None:
    f = compute_finding(None, AMX)
    assert [r.split(" ")[0] for r in f.remedies] == [
        "`--channels-last`",
        "`--bf16`",
        "`torch.compile(model)`",
        "a",
    ]
    assert mentions(f, "applies to", "scaled_dot_product_attention") == []


def test_the_diagnosis_of_a_gpt_says_no_channels_last() -> None:
    ranks = {r: msgspec.structs.replace(m, layer_shares=GPT) for r, m in good_ranks().items()}
    a = analysis([rank_steps(r, data=2.0, **COMPUTE) for r in (0, 1)])
    d = diagnose(make_input(a, ranks=ranks))
    (compute,) = [f for f in d.findings if f.code == "COMPUTE"]
    assert mentions(compute, *NHWC_WORDS) == []


def test_rank_meta_without_layer_shares_still_loads() -> None:
    old = b'{"rank": 0, "world_size": 2, "status": "completed", "steps": 5}'
    assert msgspec.json.decode(old, type=RankMeta).layer_shares is None
    meta = RankMeta(rank=0, layer_shares=GPT)
    back = msgspec.json.decode(msgspec.json.encode(meta), type=RankMeta)
    assert back.layer_shares == GPT


def test_tune_seeds_leave_channels_last_alone_without_convolutions() -> None:
    space = parse_space(["channels_last", "bf16"], SpaceContext(nproc=2, cores=8))
    finding = Finding("COMPUTE", "compute", "s", 90.0, 10.0, (), ("remedy",))
    diagnosis = dataclasses.replace(diagnose(make_input(analysis(None))), findings=(finding,))
    start = {"channels_last": False, "bf16": False}

    def seeded(shares: dict[str, float] | None) -> dict:
        ranks = {0: RankMeta(rank=0, layer_shares=shares)}
        (seed,) = seeds(diagnosis, space, start, skipped_knobs(ranks))
        return seed.config

    assert seeded(GPT) == {"channels_last": False, "bf16": True}
    assert seeded(RESNET) == {"channels_last": True, "bf16": True}
    assert seeded(None) == {"channels_last": True, "bf16": True}
