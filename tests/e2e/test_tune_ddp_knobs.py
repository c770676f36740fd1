"""The DDP knobs ``tune`` sets through the environment reach a script that knows nothing of
them: the probe applies them when the script constructs DistributedDataParallel."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from conftest import DDP_TRAIN, scalescope
from scalescope.events import Kind, load_run
from scalescope.probe.ddp import BUCKET_CAP_ENV, BUCKET_VIEW_ENV, COMM_HOOK_ENV


@pytest.mark.heavy
def test_bucket_size_bucket_view_and_compression_from_the_environment(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv(BUCKET_CAP_ENV, "7")
    monkeypatch.setenv(BUCKET_VIEW_ENV, "true")
    monkeypatch.setenv(COMM_HOOK_ENV, "bf16")
    done = scalescope(
        "run", "-n", "2", "--no-report", "--run-dir", "run", DDP_TRAIN,
        "--steps", "4", "--bucket-cap-mb", "0.05", "--facts", "facts.json", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    logging = json.loads((tmp_path / "facts.json").read_text())["logging"]
    assert logging["bucket_cap_bytes"] == 7 * 1024 * 1024  # the script asked for 0.05 MB
    assert logging["gradient_as_bucket_view"] == 1
    events = load_run(tmp_path / "run").events
    coll = events.of_kind(Kind.COLLECTIVE)
    grads = coll.select(coll.where("tag", "gradients"))
    assert len(grads) > 0
    assert set(grads.strings("dtype")) == {"bfloat16"}
    assert np.all(grads.nbytes > 0)
