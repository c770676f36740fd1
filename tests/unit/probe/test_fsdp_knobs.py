"""tune's FSDP2 knobs on a real one-rank gloo group: the environment read, the
``reshard_after_forward`` given to every ``fully_shard`` call, and explicit prefetching
set on the units when the root is sharded."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch.distributed as dist
from torch import nn

from scalescope.probe.fsdp_knobs import PREFETCH_ENV, RESHARD_ENV, fsdp_overrides, with_knobs


def test_the_environment_sets_the_knobs_and_bad_values_are_ignored() -> None:
    assert fsdp_overrides({}) == (None, 1)
    assert fsdp_overrides({RESHARD_ENV: "false", PREFETCH_ENV: "2"}) == (False, 2)
    assert fsdp_overrides({RESHARD_ENV: "True"}) == (True, 1)
    assert fsdp_overrides({RESHARD_ENV: "maybe", PREFETCH_ENV: "x"}) == (None, 1)


@pytest.fixture
def world(tmp_path: Path):
    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_no_knob_leaves_fully_shard_as_it_is() -> None:
    from torch.distributed.fsdp import fully_shard

    assert with_knobs(fully_shard, {}) is fully_shard


def test_knobs_reach_every_unit_and_the_root(world) -> None:
    from torch.distributed.fsdp import fully_shard

    shard = with_knobs(fully_shard, {RESHARD_ENV: "false", PREFETCH_ENV: "2"})
    assert with_knobs(shard, {RESHARD_ENV: "true"}) is shard, "never wrapped twice"
    model = nn.Sequential(*(nn.Linear(4, 4) for _ in range(4)), nn.LayerNorm(4))
    blocks = list(model)[:4]
    for block in blocks:
        shard(block, reshard_after_forward=True)  # the knob wins over the script's value
    shard(model)  # the root holds the LayerNorm
    states = [fully_shard.state(b) for b in blocks]
    for state in (*states, fully_shard.state(model)):
        assert state._fsdp_param_group.post_forward_mesh_info is None, "not resharded"
    forward = [[id(s) for s in st._states_to_forward_prefetch] for st in states]
    backward = [[id(s) for s in st._states_to_backward_prefetch] for st in states]
    ids = [id(s) for s in states]
    assert forward == [ids[1:3], ids[2:4], ids[3:4], []]
    assert backward == [[], ids[0:1], [ids[1], ids[0]], [ids[2], ids[1]]]
