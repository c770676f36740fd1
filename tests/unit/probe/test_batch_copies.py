"""The ``to_device`` phase on a real model, DataLoader and optimizer in this process. No GPU
here: the model lives on torch's ``meta`` device, so ``batch.to("meta")`` is a copy of the
batch to another device through the same ``Tensor.to`` a CUDA loop calls (its bytes are the
CPU tensor's; no CUDA events)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from phase_probe import watched
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

from scalescope.events.schema import EVAL, Kind
from scalescope.probe.batch_copies import PAGEABLE, TO_DEVICE, batch_tensors
from scalescope.probe.recorder import Recorder

STEP, KIND, NAME, START, DUR, NBYTES, COUNT, TAG = 0, 1, 2, 3, 4, 5, 6, 10
META = torch.device("meta")
N, BATCH, FEATURES = 12, 4, 8


@pytest.fixture
def probe(tmp_path: Path):
    with watched(tmp_path, META) as watched_model:
        yield watched_model


def phases(recorder: Recorder, name: str) -> list[list]:
    return [r for r in recorder.rows if r[KIND] == Kind.PHASE and r[NAME] == name]


def train(model: nn.Module, x: torch.Tensor, y: torch.Tensor, opt: torch.optim.Optimizer) -> None:
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    opt.zero_grad()


def test_each_batch_copy_is_one_phase_between_its_fetch_and_the_forward(probe) -> None:
    recorder, model = probe
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = TensorDataset(torch.randn(N, FEATURES), torch.randint(0, 2, (N,)))
    for x, y in DataLoader(data, BATCH):
        train(model, x.to(META, non_blocking=True), y.to(META), opt)
    copies = phases(recorder, TO_DEVICE)
    assert [r[STEP] for r in copies] == [0, 1, 2]
    want = BATCH * FEATURES * 4 + BATCH * 8  # float32 features, int64 labels
    assert [(r[NBYTES], r[COUNT], r[TAG]) for r in copies] == [(want, 2, PAGEABLE)] * 3
    fetches, forwards = phases(recorder, "data"), phases(recorder, "forward")
    for copy, fetch, forward in zip(copies, fetches, forwards, strict=True):
        assert fetch[START] + fetch[DUR] <= copy[START]
        assert copy[START] + copy[DUR] <= forward[START]


def test_tensor_to_is_torchs_own_outside_the_window(probe) -> None:
    recorder, model = probe
    original = torch.Tensor.to
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = TensorDataset(torch.randn(N, FEATURES), torch.randint(0, 2, (N,)))
    for x, y in DataLoader(data, BATCH):
        assert torch.Tensor.to is not original, "wrapped from the fetch"
        other = torch.ones(3).to(META)  # not the batch's: no copy of it counted
        train(model, x.to(META), y.to(META), opt)
        assert torch.Tensor.to is original, "torch's own once the forward took the batch"
        assert other.device == META
    assert {r[NBYTES] for r in phases(recorder, TO_DEVICE)} == {BATCH * FEATURES * 4 + BATCH * 8}


class Tokens(Dataset):
    """Hugging Face style samples: a mapping of uint8 'pixels' and int64 labels."""

    def __len__(self) -> int:
        return N

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"x": torch.full((FEATURES,), i, dtype=torch.uint8), "y": torch.tensor(i % 2)}


def test_a_mapping_batch_converted_on_the_host_then_copied(probe) -> None:
    recorder, model = probe
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for batch in DataLoader(Tokens(), BATCH):
        x = batch["x"].float().to(META)  # the conversion's result is the batch's too
        train(model, x, batch["y"].to(META), opt)
    copies = phases(recorder, TO_DEVICE)
    assert [(r[NBYTES], r[COUNT]) for r in copies] == [(BATCH * FEATURES * 4 + BATCH * 8, 2)] * 3


def test_an_evaluations_copies_are_evaluation(probe) -> None:
    recorder, model = probe
    data = TensorDataset(torch.randn(N, FEATURES), torch.randint(0, 2, (N,)))
    model.eval()
    with torch.no_grad():
        for x, _y in DataLoader(data, BATCH):
            model(x.to(META))
    assert phases(recorder, TO_DEVICE) == []
    evals = [r for r in phases(recorder, EVAL) if r[NBYTES]]
    assert [r[NBYTES] for r in evals] == [BATCH * FEATURES * 4] * 3


def test_batch_tensors_of_nested_batches() -> None:
    a, b, c = torch.ones(1), torch.ones(2), torch.ones(3)
    assert batch_tensors((a, [b, {"k": c}], "text", 3)) == [a, b, c]
    assert batch_tensors("text") == []
