"""The tags of collectives: who issued them (the probe sets them, the analysis reads them).

``user``: the script's own calls; DDP's: ``gradients`` (its buckets), ``parameters`` and
``buffers`` (its broadcasts); FSDP's, one per unit (the module's name, ``root`` for the
outermost): ``unshard:NAME`` (the parameter all-gather) and ``reduce_grads:NAME`` (the
gradient reduce-scatter, and HSDP's all-reduce); DeepSpeed ZeRO's (the stage is in the rank's
meta): ``zero_gather_params`` (the parameter all-gather: ZeRO 3's fetch and prefetch, ZeRO 1/2's
gather of the updated partitions after the step), ``zero_reduce_grads`` (the gradient reduce,
all-reduce or reduce-scatter) and ``zero_step`` (the ZeRO optimizer's own: norms, overflow
checks); the engine's construction (its broadcast of the parameters) is ``parameters``;
DeepSpeed's pipeline engine's sends and receives: ``pipe_activations`` (a stage's outputs to
the next, forward) and ``pipe_grads`` (the gradients of its inputs to the one before,
backward).
"""

from __future__ import annotations

USER = "user"
GRADIENTS = "gradients"
UNSHARD = "unshard"
REDUCE_GRADS = "reduce_grads"
ZERO_GATHER = "zero_gather_params"
ZERO_REDUCE = "zero_reduce_grads"
ZERO_STEP = "zero_step"
PARAMETERS = "parameters"
PIPE_ACTIVATIONS = "pipe_activations"
PIPE_GRADS = "pipe_grads"
GRADIENT_EXCHANGE = (GRADIENTS, REDUCE_GRADS, ZERO_REDUCE)
"""Kinds of tag that say the ranks exchanged gradients (data parallelism of some kind)."""
ROOT_UNIT = "root"


def unit_tag(kind: str, unit: str | None) -> str:
    return f"{kind}:{unit or ROOT_UNIT}"


def tag_kind(tag: str) -> str:
    """``unshard`` of ``unshard:layers.0``; a tag without a unit is its own kind."""
    return tag.split(":", 1)[0]


def tag_unit(tag: str) -> str | None:
    """The FSDP unit a tag names (None for a tag without one)."""
    _kind, sep, unit = tag.partition(":")
    return unit if sep else None
