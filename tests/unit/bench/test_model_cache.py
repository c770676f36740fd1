"""The model's FLOP count and forward traffic are kept on disk: a second ask reads them
instead of building the model, and a damaged or unwritable cache only costs a recount."""

from __future__ import annotations

import json

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from scalescope.bench import flops, model_cache
from scalescope.bench.models import build_model
from scalescope.predict import costs

OPTIONS = {"model": "resnet18", "image_size": 32, "num_classes": 10}


@pytest.fixture
def cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    flops._forward_flops.cache_clear()
    costs.forward_bytes.cache_clear()
    yield tmp_path / "cache" / "scalescope" / model_cache.CACHE_NAME
    flops._forward_flops.cache_clear()
    costs.forward_bytes.cache_clear()


def _counted_here() -> float:
    net = build_model("resnet18", 10, image_size=32).eval()
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        net(torch.zeros(1, 3, 32, 32))
    return float(counter.get_total_flops())


def _no_counting(*_args: object) -> float:
    raise AssertionError("the model was built again")


def test_a_second_ask_reads_the_count_kept_on_disk(cache_home, monkeypatch):
    first = flops.count_model_flops("resnet18", OPTIONS)
    assert first is not None and first.forward_flops == _counted_here()
    kept = json.loads(cache_home.read_text())
    kept = {k: v for k, v in kept.items() if k.startswith("forward FLOPs")}
    assert list(kept.values()) == [[first.forward_flops]]
    (key,) = kept
    assert key.startswith("forward FLOPs: resnet18 32px 10 classes; torch ")
    flops._forward_flops.cache_clear()
    monkeypatch.setattr(flops, "_count_forward_flops", _no_counting)
    assert flops.count_model_flops("resnet18", OPTIONS) == first


def test_the_forward_traffic_is_kept_beside_the_flops(cache_home, monkeypatch):
    cost = costs.model_cost("resnet18", OPTIONS)
    assert cost is not None
    resnet18 = build_model("resnet18", 10, image_size=32)
    assert cost.parameter_bytes == 4 * sum(p.numel() for p in resnet18.parameters())
    kept = json.loads(cache_home.read_text())
    assert sorted(k.split(":")[0] for k in kept) == ["forward FLOPs", "forward bytes"]
    flops._forward_flops.cache_clear()
    costs.forward_bytes.cache_clear()
    monkeypatch.setattr(flops, "_count_forward_flops", _no_counting)
    monkeypatch.setattr(costs, "_count_forward_bytes", _no_counting)
    assert costs.model_cost("resnet18", OPTIONS) == cost


def test_a_damaged_cache_is_counted_again_and_rewritten(cache_home):
    cache_home.parent.mkdir(parents=True)
    cache_home.write_text('{"resnet18 32px')
    counted = flops.count_model_flops("resnet18", OPTIONS)
    assert counted is not None and counted.forward_flops == _counted_here()
    assert list(json.loads(cache_home.read_text()).values()) == [[counted.forward_flops]]


def test_an_unwritable_cache_still_counts(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    flops._forward_flops.cache_clear()
    counted = flops.count_model_flops("resnet18", OPTIONS)
    flops._forward_flops.cache_clear()
    assert counted is not None and counted.forward_flops == _counted_here()


def test_no_home_no_cache(monkeypatch):
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("HOME", raising=False)
    monkeypatch.setattr(model_cache.Path, "home", _no_home)
    assert model_cache.cache_path() is None
    flops._forward_flops.cache_clear()
    counted = flops.count_model_flops("resnet18", OPTIONS)
    flops._forward_flops.cache_clear()
    assert counted is not None and counted.forward_flops == _counted_here()


def _no_home() -> model_cache.Path:
    raise RuntimeError("Could not determine home directory.")
