"""The options several commands take, each declared once: its flags and bounds. A command's
field gives the default, the panel and (its docstring) the help."""

from __future__ import annotations

from scalescope.launch.options.fields import ARGUMENT, BOUNDS, FLAGS, GROUP, PANEL, Flag

__all__ = ["ARGUMENT", "BOUNDS", "FLAGS", "GROUP", "PANEL"]

JSON = Flag(("--json",))
TIMELINE = Flag(("--timeline",))
STEPS = Flag(("--steps",), {"min": 1})
RANKS = Flag(("--ranks",))
THRESHOLD = Flag(("--threshold", "-t"))
BASELINE = Flag(("--baseline",))
BATCH_SIZE = Flag(("--batch-size",), {"min": 1})
GLOBAL_BATCH = Flag(("--global-batch",))
IMAGE_SIZE = Flag(("--image-size",), {"min": 8})
WARMUP_STEPS = Flag(("--warmup-steps",), {"min": 0})
WORKERS = Flag(("--workers",))
SEED = Flag(("--seed",))
FSDP = Flag(("--fsdp",))
BENCH = Flag(("--bench",))
MODULE = Flag(("--module", "-m"))
NODES = Flag(("--nodes",))
RANK = Flag(("--rank",), {"min": 0})
CONNECT = Flag(("--connect",), {"metavar": "HOST:PORT"})
