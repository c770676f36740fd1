"""What the phase hooks record beside training, on a real model, DataLoaders and optimizers in
this process: evaluation forwards and the batches fetched for them (``eval``, not training
samples), ``torch.save`` (``checkpoint`` with its bytes), and an optimizer that runs the model
inside ``step(closure)`` (its phase is its own time, never overlapping forward or backward)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import torch
from phase_probe import watched
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from scalescope.events.schema import Kind
from scalescope.probe.recorder import Recorder

STEP, KIND, NAME, START, DUR, NBYTES, COUNT = 0, 1, 2, 3, 4, 5, 6


@pytest.fixture
def probe(tmp_path: Path):
    with watched(tmp_path) as watched_model:
        yield watched_model


def loader(n: int, batch: int = 4) -> DataLoader:
    return DataLoader(TensorDataset(torch.randn(n, 8), torch.randint(0, 2, (n,))), batch)


def train_step(model: nn.Module, opt: torch.optim.Optimizer, x, y) -> None:  # noqa: ANN001
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    opt.zero_grad()


def rows(recorder: Recorder, kind: Kind) -> list[list]:
    return [r for r in recorder.rows if r[KIND] == kind]


def names(recorder: Recorder, step: int) -> list[str]:
    return [r[NAME] for r in rows(recorder, Kind.PHASE) if r[STEP] == step]


def test_evaluation_is_eval_and_its_batches_are_not_training_samples(probe) -> None:
    recorder, model = probe
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    train, val = loader(16), loader(40)
    for i, (x, y) in enumerate(train):
        if i == 2:  # an evaluation that breaks off: its loop fetched one batch too many
            model.eval()
            with torch.no_grad():
                for j, (vx, _vy) in enumerate(val):
                    if j == 3:
                        break
                    model(vx)
            model.train()
        train_step(model, opt, x[:2], y[:2])  # the loader's batch counts, not the forward's
    steps = rows(recorder, Kind.STEP)
    assert [r[COUNT] for r in steps] == [4, 4, 4, 4], "only the training batches"
    assert names(recorder, 2).count("eval") == 3 + 4, "3 forwards and 4 batches fetched"
    assert names(recorder, 2).count("forward") == 1 and names(recorder, 2).count("data") == 1


def test_evaluating_the_wrapped_model_directly_is_eval(probe) -> None:
    """Hugging Face's Trainer evaluates ``ddp.module``, past DDP's forward: its forwards and
    their batches are ``eval``; a training forward through the wrapper is timed once."""
    recorder, model = probe
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for i, (x, y) in enumerate(loader(12)):
        if i == 1:
            model.eval()
            with torch.no_grad():
                for vx, _vy in loader(8, batch=2):
                    model.module(vx)
            model.train()
        train_step(model, opt, x, y)
    assert [r[COUNT] for r in rows(recorder, Kind.STEP)] == [4, 4, 4]
    assert names(recorder, 1).count("eval") == 4 + 4, "4 forwards and 4 batches fetched"
    for step in (0, 1, 2):
        assert names(recorder, step).count("forward") == 1, names(recorder, step)
    phases = sorted(rows(recorder, Kind.PHASE), key=lambda r: r[START])
    for a, b in zip(phases, phases[1:], strict=False):
        assert a[START] + a[DUR] <= b[START], (a[NAME], b[NAME], "phases overlap")


def test_a_wrapper_left_in_eval_mode_still_trains(probe) -> None:
    """Lightning puts its module back in training after validation and leaves DDP's wrapper
    in eval: the forward is training while grad is on and the wrapped module trains."""
    recorder, model = probe
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model.eval()
    model.module.train()
    for x, y in loader(8):
        train_step(model, opt, x, y)
    assert [r[COUNT] for r in rows(recorder, Kind.STEP)] == [4, 4]
    assert "eval" not in names(recorder, 0) + names(recorder, 1)


def test_a_closure_optimizers_phase_excludes_the_forward_and_backward_inside(probe) -> None:
    recorder, model = probe
    opt = torch.optim.LBFGS(model.parameters(), max_iter=3)
    for x, y in loader(8):

        def closure(x: torch.Tensor = x, y: torch.Tensor = y) -> torch.Tensor:
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            return loss

        opt.step(closure)
    steps = rows(recorder, Kind.STEP)
    phases = sorted(rows(recorder, Kind.PHASE), key=lambda r: r[START])
    for a, b in zip(phases, phases[1:], strict=False):
        assert a[START] + a[DUR] <= b[START], (a[NAME], b[NAME], "phases overlap")
    for step in steps:
        mine = [r for r in phases if r[STEP] == step[STEP] and r[NAME] != "data"]
        assert sum(r[DUR] for r in mine) <= step[DUR]
        assert {r[NAME] for r in mine} == {"optimizer", "forward", "backward"}
    assert [r[COUNT] for r in steps] == [4, 4], "each batch once, however often LBFGS runs it"


def test_torch_save_is_a_checkpoint_with_its_bytes(probe, tmp_path: Path) -> None:
    recorder, model = probe
    torch.save(model.state_dict(), tmp_path / "ckpt.pt")
    buffer = io.BytesIO()
    buffer.write(b"header")
    torch.save(model.state_dict(), buffer)
    saved = [r for r in rows(recorder, Kind.PHASE) if r[NAME] == "checkpoint"]
    assert [r[NBYTES] for r in saved] == [
        (tmp_path / "ckpt.pt").stat().st_size,
        len(buffer.getvalue()) - len(b"header"),
    ]
    assert all(r[DUR] > 0 for r in saved)


def test_the_stepped_model_is_found_beside_a_dead_weak_proxy() -> None:
    """torchtitan leaves weak proxies whose referent is gone among the collector's objects:
    ``isinstance`` on one raises ReferenceError; the search skips them."""
    import gc
    import weakref

    from scalescope.probe.stepped_module import stepped_module

    class Gone(nn.Module):
        pass

    gone = Gone()
    proxy = weakref.proxy(gone)
    del gone
    gc.collect()
    holder = [proxy]  # keeps the dead proxy reachable by gc.get_objects()
    with pytest.raises(ReferenceError):
        isinstance(holder[0], nn.Module)
    model = nn.Sequential(nn.Linear(4, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    assert stepped_module(opt) is model
