"""launch/process/local.py's ``rendezvous_kept``: the handler torch's launcher makes (and with
it the store node 0 hosts) lives until the block ends, not until ``launch`` returns, so that
no relay or watch meets a dropped store (torch's ``Broken pipe`` trace); then it is let go."""

from __future__ import annotations

import gc
import weakref

import torch.distributed.elastic.rendezvous.registry as registry

from scalescope.launch.process.local import rendezvous_kept


class Handler:
    pass


def test_the_handler_lives_until_the_block_ends(monkeypatch) -> None:
    def make(_params: object) -> Handler:
        return Handler()

    monkeypatch.setattr(registry, "get_rendezvous_handler", make)
    with rendezvous_kept() as kept:
        alive = weakref.ref(registry.get_rendezvous_handler(None))  # as launch drops it
        gc.collect()
        assert alive() is not None and kept == [alive()]
    gc.collect()
    assert alive() is None, "let go once the launcher closed its channel"
    assert registry.get_rendezvous_handler is make
