"""A warning DDP's constructor gives (torch 2.14: ``broadcast_buffers`` deprecated) names the
script's line that built the DDP, not the probe's wrapper around the constructor."""

from __future__ import annotations

import warnings

import pytest

from scalescope.probe.ddp import DDPPatch


class Unattached(DDPPatch):
    def attach(self, ddp) -> None:  # noqa: ANN001
        self.attached = ddp


def test_the_constructors_warning_names_the_line_that_built_it() -> None:
    def original(ddp, *args, **kwargs) -> None:  # noqa: ANN001
        warnings.warn("`broadcast_buffers` is deprecated", FutureWarning, stacklevel=2)

    patch = Unattached(None, None, None)  # type: ignore[arg-type]
    init = patch._patched_init(original)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        init("the ddp", broadcast_buffers=False)  # this line
    assert [(w.category, str(w.message)) for w in caught] == [
        (FutureWarning, "`broadcast_buffers` is deprecated")
    ]
    assert caught[0].filename == __file__
    assert patch.attached == "the ddp"


def test_a_constructor_that_fails_still_shows_its_warnings() -> None:
    def original(ddp, *args, **kwargs) -> None:  # noqa: ANN001
        warnings.warn("about to fail", UserWarning, stacklevel=2)
        raise ValueError("bad argument")

    init = Unattached(None, None, None)._patched_init(original)  # type: ignore[arg-type]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ValueError, match="bad argument"):
            init("the ddp")
    assert [str(w.message) for w in caught] == ["about to fail"]
    assert caught[0].filename == __file__
