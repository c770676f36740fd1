"""A one-rank gloo world in this process, for probe tests that need a process group."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch.distributed as dist


@pytest.fixture
def world(tmp_path: Path):
    store = dist.FileStore(str(tmp_path / "store"), 1)  # no port to race for
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    yield
    dist.destroy_process_group()
