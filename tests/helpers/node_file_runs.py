"""Runs with node files and sampled rank files from the generator
(benchmarks/synthetic_nodes.py), and a hostile copy: one host and the command line replaced by
markup, for the node-file dashboard's tests."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from synthetic_nodes import write_scale_run  # noqa: E402

RANKS, STEPS = 256, 120
"""32 nodes of 8 ranks; 115 measured steps (the generator's warm-up is 5)."""


def node_file_run(path: Path, plant: str | None = "slow_node", layout: str = "ddp"):
    """A run of ``RANKS`` x ``STEPS`` with ``plant``; its truth (the planted node's host)."""
    return write_scale_run(path, RANKS, STEPS, plant, seed=11, layout=layout, sample_every=4)


def make_hostile(src: Path, dst: Path, host: str, text: str) -> Path:
    """A copy of ``src`` at ``dst`` whose host ``host`` is named ``text`` in the node
    manifest and whose command line carries ``text``."""
    shutil.copytree(src, dst)
    manifest = dst / "node_events" / "nodes.json"
    data = json.loads(manifest.read_text())
    for node in data["nodes"]:
        if node["host"] == host:
            node["host"] = text
    manifest.write_text(json.dumps(data))
    run = dst / "run.json"
    meta = json.loads(run.read_text())
    meta["command"] = [*meta["command"], "--tag", text]
    run.write_text(json.dumps(meta))
    return dst
