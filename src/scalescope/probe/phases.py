"""Step phases from hooks on the DataLoader iterator, the DDP module, backward and optimizers.

No per-submodule hooks: the data wait is ``_BaseDataLoaderIter.__next__``, forward is
the DDP root module's pre/post hooks (and those of the model it wraps, for a call that skips
the wrapper: evaluation of ``ddp.module``), backward is ``torch.autograd.backward`` (which
``Tensor.backward`` calls), and a step ends at the first optimizer's ``step()`` through
torch's global optimizer hooks.

When the DDP module's parameters are on a CUDA device, forward, backward (and its
comm_wait tail) and the optimizer step are timed on the device: CUDA events recorded at
the same host moments, resolved at flush (``cuda_timing``). Their host times only say
when the work was queued. The data wait stays a host time: it is the host that waits.

Samples of a step: the batches the DataLoader gave for its training forwards; in a step with
none (a script that feeds plain tensors), the leading dimension of the first tensor given to
the DDP module's forward while training (grad enabled, ``module.training``), summed over the
forwards of the step (gradient accumulation). A forward outside training (grad disabled or
the module in eval mode: evaluation) is the phase ``eval``, and so are the batches fetched
for it; neither counts as training. ``torch.save`` is the phase ``checkpoint`` with the bytes
it wrote (probe/checkpoints.py). A DeepSpeed engine's ``backward`` and ``step`` are its
phases, and its step ends the step (probe/deepspeed.py).

An optimizer that runs the model inside ``step(closure)`` (Lightning, LBFGS) has forward and
backward inside its step: the optimizer phase is then its own time only, in pieces around
them (host times), so a step's phases never overlap. Without DDP the module that holds the
parameters the optimizer steps (probe/stepped_module.py) is watched from the second step on,
and its forward counts the same way; with no such module (weights as plain tensors) nothing
is counted, and throughput is in global steps/s.
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from typing import Any

import torch
from torch.utils.data import dataloader

from scalescope.events.schema import EVAL
from scalescope.probe.batch_copies import TO_DEVICE, BatchCopies
from scalescope.probe.checkpoints import patched_save
from scalescope.probe.cuda_timing import CudaTimings
from scalescope.probe.recorder import Recorder
from scalescope.probe.stepped_module import param_bytes, stepped_module


def batch_size_of(batch: Any) -> int:
    """Samples in a batch: the first dimension of its first tensor (0 when there is none)."""
    while isinstance(batch, (list, tuple)) and batch:
        batch = batch[0]
    if isinstance(batch, dict) and batch:
        return batch_size_of(next(iter(batch.values())))
    if isinstance(batch, torch.Tensor) and batch.dim() > 0:
        return int(batch.shape[0])
    return 0


class PhaseHooks:
    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self._forward_start: int | None = None
        self._last_bucket_ns: int | None = None
        self._optimizer_start: int | None = None
        self._optimizer_piece: int | None = None
        """Start of the optimizer's current piece of own time; None while a forward or
        backward runs inside its step (a closure)."""
        self.paused = 0
        """Above 0 inside a pipeline stage's chunk (probe/pipeline.py): it records the
        forward and backward itself."""
        self._nested = False
        """The current optimizer step ran forward or backward inside it."""
        self._forward_name = "forward"
        self._inner_forward = False
        """The current forward is the wrapped model's, called without its wrapper."""
        self._fetched: list[tuple[list, int, Any]] = []
        """(data row, samples, iterator) of each batch since the last forward: they go to
        that forward, training or evaluation."""
        self._eval_iterators: weakref.WeakSet = weakref.WeakSet()
        """Iterators that fed an evaluation: a batch they give is evaluation, even one left
        over when the loop broke off (a training forward comes next)."""
        self._stepping_optimizer: int | None = None
        self._saved: dict[str, Any] = {}
        self._handles: list[Any] = []
        self.cuda = CudaTimings()
        self.copies = BatchCopies(recorder, self.cuda)
        """The batches' copies to the device (the ``to_device`` phase)."""
        self.on_cuda = False
        """Set when the watched module's parameters are on a CUDA device."""
        self._events: dict[str, Any] = {}
        self.forward_watched = False
        self.watched: torch.nn.Module | None = None
        """The module whose forward is timed (DDP's, FSDP's root, or the stepped model)."""
        self._searched_model = False
        self.stepped_param_bytes: int | None = None
        """Bytes of the parameters the stepping optimizer updates (set at its first step)."""
        self.engine_backward = False
        """Inside a DeepSpeed engine's ``backward``: that is the phase (probe/deepspeed.py)."""
        self.engine_step = False
        """Inside a DeepSpeed engine's ``step``: it times the optimizer and ends the step."""

    def install(self) -> None:
        it = dataloader._BaseDataLoaderIter
        self._saved = {
            "next": it.__next__, "backward": torch.autograd.backward, "save": torch.save,
        }  # fmt: skip
        it.__next__ = self._patched_next(it.__next__)
        torch.autograd.backward = self._patched_backward(torch.autograd.backward)
        torch.save = patched_save(torch.save, self.recorder)
        self.recorder.before_step_end.append(self._count_unclaimed_batches)
        self.recorder.before_step_end.append(self.copies.close)
        from torch.optim.optimizer import (
            register_optimizer_step_post_hook,
            register_optimizer_step_pre_hook,
        )

        self._handles = [
            register_optimizer_step_pre_hook(self._optimizer_pre),
            register_optimizer_step_post_hook(self._optimizer_post),
        ]

    def uninstall(self) -> None:
        if self._saved:
            dataloader._BaseDataLoaderIter.__next__ = self._saved["next"]
            torch.autograd.backward = self._saved["backward"]
            torch.save = self._saved["save"]
        for hook in (self._count_unclaimed_batches, self.copies.close):
            if hook in self.recorder.before_step_end:
                self.recorder.before_step_end.remove(hook)
        self.copies.close()
        for handle in self._handles:
            handle.remove()
        self._saved, self._handles = {}, []

    def _patched_next(self, original: Any) -> Any:
        recorder = self.recorder

        @functools.wraps(original)
        def __next__(iterator: Any) -> Any:
            start = recorder.now()
            recorder.enter_phase("data", start)
            batch = original(iterator)
            row = recorder.phase("data", start, recorder.now())
            self._fetched.append((row, batch_size_of(batch), iterator))
            self.copies.fetched(batch)
            return batch

        return __next__

    def claim_batches(self, training: bool) -> None:
        """The batches fetched since the last forward fed this one. A training forward
        counts them, but for those of an iterator that fed an evaluation (a batch left over
        when its loop broke off). An evaluation takes those of the iterator that gave the
        last batch (its loader), leaving a training batch fetched before it pending."""
        if not training and self._fetched:
            source = self._fetched[-1][2]
            with contextlib.suppress(TypeError):  # an iterator without weak references
                self._eval_iterators.add(source)
            mine = [f for f in self._fetched if f[2] is source]
            self._fetched = [f for f in self._fetched if f[2] is not source]
            for row, _samples, _iterator in mine:
                row[2] = EVAL
            return
        self._count_fetched()

    def _count_fetched(self) -> None:
        for row, samples, iterator in self._fetched:
            if self._fed_evaluation(iterator):
                row[2] = EVAL
            else:
                self.recorder.loader_samples += samples
        self._fetched = []

    def _fed_evaluation(self, iterator: Any) -> bool:
        try:
            return iterator in self._eval_iterators
        except TypeError:  # an iterator without weak references
            return False

    def _count_unclaimed_batches(self) -> None:
        """A step whose forward is not watched (the first, without DDP) counts what it
        fetched, as before evaluation was told apart; so does a step whose batches pile up
        with no forward to take them (a script calling the wrapped module directly)."""
        if not self.forward_watched or len(self._fetched) > UNCLAIMED_MAX:
            self._count_fetched()

    def watch_forward(self, module: torch.nn.Module) -> None:
        param = next(module.parameters(), None)
        self.on_cuda = self.copies.on_cuda = param is not None and param.is_cuda
        module.register_forward_pre_hook(self._forward_pre, with_kwargs=True)
        module.register_forward_hook(self._forward_post)
        inner = getattr(module, "module", None)
        if isinstance(inner, torch.nn.Module) and inner is not module:
            inner.register_forward_pre_hook(self._inner_pre, with_kwargs=True)
            inner.register_forward_hook(self._inner_post, always_call=True)
        self.forward_watched = True
        self.watched = module

    def _inner_pre(self, module: Any, args: Any, kwargs: Any) -> None:
        """The wrapped model called directly, not from its wrapper's forward (Hugging Face's
        Trainer evaluates ``model.module``, as do scripts): a forward all the same."""
        if self._forward_start is None:
            self._inner_forward = True
            self._forward_pre(module, args, kwargs)

    def _inner_post(self, module: Any, inputs: Any, output: Any) -> None:
        if self._inner_forward:
            self._inner_forward = False
            self._forward_post(module, inputs, output)

    def _mark(self, key: str) -> None:
        """A CUDA event at this host moment, when timing on the device."""
        if self.on_cuda:
            self._events[key] = self.cuda.start()

    def _phase(self, name: str, start_ns: int, end_ns: int, start: str, end: str) -> None:
        """A phase row; on CUDA its duration is the device time between two marks."""
        row = self.recorder.phase(name, start_ns, end_ns)
        first, last = self._events.get(start), self._events.get(end)
        if self.on_cuda and first is not None and last is not None:
            self.cuda.span(row, first, last)

    def _forward_pre(self, module: Any, args: Any, kwargs: Any) -> None:
        if self.paused:
            return
        training = torch.is_grad_enabled() and _in_training(module)
        self.copies.close(TO_DEVICE if training else EVAL)
        self._forward_start = self.recorder.now()
        self._pause_optimizer(self._forward_start)
        self._mark("forward_start")
        if training:
            first = batch_size_of(args) if args else batch_size_of(kwargs)
            self.recorder.forward_samples += first
        self.claim_batches(training)
        self._forward_name = "forward" if training else EVAL
        self.recorder.enter_phase(self._forward_name, self._forward_start)

    def _forward_post(self, _module: Any, _inputs: Any, _output: Any) -> None:
        if self._forward_start is not None:
            self._mark("forward_end")
            end = self.recorder.now()
            self._phase(
                self._forward_name, self._forward_start, end, "forward_start", "forward_end"
            )
            self._forward_start = None
            self._resume_optimizer(end)

    def _pause_optimizer(self, now: int) -> None:
        """A forward or backward inside the optimizer's step: its piece so far is its own."""
        if self._optimizer_start is None:
            return
        self._nested = True
        if self._optimizer_piece is not None and now > self._optimizer_piece:
            self.recorder.phase("optimizer", self._optimizer_piece, now)
        self._optimizer_piece = None

    def _resume_optimizer(self, now: int) -> None:
        if self._optimizer_start is not None:
            self._optimizer_piece = now
            self.recorder.enter_phase("optimizer", now)

    def on_bucket(self) -> None:
        self._last_bucket_ns = self.recorder.now(latest="bucket")
        self._mark("bucket")

    def _patched_backward(self, original: Any) -> Any:
        @functools.wraps(original)
        def backward(*args: Any, **kwargs: Any) -> Any:
            if self.engine_backward or self.paused:
                return original(*args, **kwargs)
            self._last_bucket_ns = None
            self._events.pop("bucket", None)
            start = self.recorder.now()
            self._pause_optimizer(start)
            self._mark("backward_start")
            self.recorder.enter_phase("backward", start)
            result = original(*args, **kwargs)
            self._mark("backward_end")
            end = self.recorder.now()
            self._record_backward(start, end)
            self._resume_optimizer(end)
            return result

        return backward

    def _record_backward(self, start: int, end: int) -> None:
        """Split backward at the last gradient bucket's issue: after it, DDP only waits."""
        compute_end = self._last_bucket_ns if self._last_bucket_ns is not None else end
        compute_end = min(max(compute_end, start), end)
        split = "bucket" if compute_end < end else "backward_end"
        self._phase("backward", start, compute_end, "backward_start", split)
        if compute_end < end:
            self._phase("comm_wait", compute_end, end, "bucket", "backward_end")

    def _optimizer_pre(self, optimizer: Any, _args: Any, _kwargs: Any) -> None:
        if self.engine_step:
            return
        if self._stepping_optimizer is None:
            self._stepping_optimizer = id(optimizer)
        if id(optimizer) == self._stepping_optimizer:
            self._optimizer_start = self._optimizer_piece = self.recorder.now()
            self._nested = False
            self._mark("optimizer_start")
            self.recorder.enter_phase("optimizer", self._optimizer_start)

    def _optimizer_post(self, optimizer: Any, _args: Any, _kwargs: Any) -> None:
        if self.engine_step and self.stepped_param_bytes is None:
            self.stepped_param_bytes = param_bytes(optimizer)
        if id(optimizer) != self._stepping_optimizer or self._optimizer_start is None:
            return
        end = self.recorder.now()
        self._mark("optimizer_end")
        if not self._nested:
            self._phase("optimizer", self._optimizer_start, end, "optimizer_start", "optimizer_end")
        elif self._optimizer_piece is not None and end > self._optimizer_piece:
            self.recorder.phase("optimizer", self._optimizer_piece, end)
        self._optimizer_start = self._optimizer_piece = None
        self.recorder.end_step(end)
        if self.stepped_param_bytes is None:
            self.stepped_param_bytes = param_bytes(optimizer)
        if not self.forward_watched and not self._searched_model:
            self._watch_stepped_model(optimizer)

    def _watch_stepped_model(self, optimizer: Any) -> None:
        """No DDP module: time the forward of the model whose parameters the optimizer steps
        (found once, after the first step; that step's forward stays in "other")."""
        self._searched_model = True
        module = stepped_module(optimizer)
        if module is None:
            self.recorder.errors.append(
                "forward not recorded: no module holds the parameters the optimizer steps"
            )
            return
        self.watch_forward(module)


UNCLAIMED_MAX = 64
"""Batches fetched with no forward taking them before they count at a step's end."""


def _in_training(module: Any) -> bool:
    """The module, or the one a wrapper holds, is in training mode (Lightning puts its
    module back in training after validation and leaves DDP's wrapper in eval)."""
    inner = getattr(module, "module", None)
    return bool(module.training or (isinstance(inner, torch.nn.Module) and inner.training))
