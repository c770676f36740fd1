import pytest
import torch

from scalescope.bench.models import build_model, classification_models, validate_model


def test_lists_classification_models_only() -> None:
    names = classification_models()
    assert names == sorted(set(names))
    assert {"resnet18", "resnet50", "vit_b_16", "mobilenet_v3_small"} <= set(names)
    for other in ("fasterrcnn_resnet50_fpn", "deeplabv3_resnet50", "r3d_18", "raft_large"):
        assert other not in names


def test_validate_model_accepts_known() -> None:
    validate_model("resnet18")


@pytest.mark.parametrize("name", ["resnet", "ResNet18", "", "fasterrcnn_resnet50_fpn"])
def test_validate_model_rejects_unknown_in_one_line(name: str) -> None:
    with pytest.raises(ValueError) as info:
        validate_model(name)
    message = str(info.value)
    assert "\n" not in message
    assert f"unknown model {name!r}" in message
    assert "resnet18" in message and "vit_b_16" in message


def test_build_model_never_downloads(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_download(*args: object, **kwargs: object) -> None:
        raise AssertionError("tried to download weights")

    monkeypatch.setattr(torch.hub, "load_state_dict_from_url", no_download)
    model = build_model("resnet18", num_classes=7)
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 7)


def test_build_model_rejects_unknown() -> None:
    with pytest.raises(ValueError, match="unknown model"):
        build_model("nope", num_classes=10)


@pytest.mark.parametrize(("name", "size"), [("googlenet", 64), ("vit_b_32", 64)])
def test_models_train_on_plain_logits(name: str, size: int) -> None:
    model = build_model(name, num_classes=5, image_size=size).train()
    out = model(torch.randn(2, 3, size, size))
    assert isinstance(out, torch.Tensor)
    assert out.shape == (2, 5)
