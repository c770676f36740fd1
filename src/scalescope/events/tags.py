"""The tags of collectives: who issued them (the probe sets them, the analysis reads them).

``user``: the script's own calls; DDP's: ``gradients`` (its buckets), ``parameters`` and
``buffers`` (its broadcasts); FSDP's, one per unit (the module's name, ``root`` for the
outermost): ``unshard:NAME`` (the parameter all-gather) and ``reduce_grads:NAME`` (the
gradient reduce-scatter, and HSDP's all-reduce).
"""

from __future__ import annotations

USER = "user"
GRADIENTS = "gradients"
UNSHARD = "unshard"
REDUCE_GRADS = "reduce_grads"
GRADIENT_EXCHANGE = (GRADIENTS, REDUCE_GRADS)
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
