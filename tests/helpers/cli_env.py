"""The environment a test runs scalescope's CLI in: the caller's, without its
OMP_NUM_THREADS (scalescope sets each rank's), unbuffered."""

from __future__ import annotations

import os


def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("OMP_NUM_THREADS", None)
    env["PYTHONUNBUFFERED"] = "1"
    return env
