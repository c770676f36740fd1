import pytest
import torch
import torchvision
from torch.utils.flop_counter import FlopCounterMode

from scalescope.predict.costs import PARAM_PASSES, TRAIN_FACTOR, model_cost

OPTIONS = {"model": "resnet18", "image_size": 32}


def test_resnet18_cost_against_independent_counts():
    cost = model_cost("resnet18", OPTIONS)
    net = torchvision.models.resnet18(num_classes=1000)
    assert cost.parameter_bytes == 4 * sum(p.numel() for p in net.parameters())
    # what autograd keeps: at least the logits and the stem's 64-channel 16x16 output
    assert cost.activation_bytes_per_sample > 4 * (1000 + 64 * 16 * 16)
    # every forward output is written once and read at least once (loss aside)
    assert cost.activation_traffic_per_sample >= TRAIN_FACTOR * cost.activation_bytes_per_sample
    with FlopCounterMode(display=False) as counter:
        net.eval()(torch.zeros(1, 3, 32, 32))
    assert cost.flops_per_sample == pytest.approx(3 * counter.get_total_flops())


def test_parameter_traffic_is_shared_by_the_batch():
    cost = model_cost("resnet18", OPTIONS)
    per_step = PARAM_PASSES * cost.parameter_bytes
    assert cost.bytes_per_sample(1) - cost.bytes_per_sample(8) == pytest.approx(
        per_step - per_step / 8
    )


def test_scripts_have_no_cost():
    assert model_cost("script", {"image_size": 32}) is None
