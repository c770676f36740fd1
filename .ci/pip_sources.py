"""Print the uv flags for the package sources pip is configured with (``pip config list``:
index URLs, find-links, constraints), since uv reads no pip.conf: on a machine whose pip takes
torch from a local index and caps its version, uv then does the same."""

from __future__ import annotations

import shlex
import subprocess
import sys

FLAGS = {
    "index-url": "--index-url",
    "extra-index-url": "--extra-index-url",
    "find-links": "--find-links",
    "constraint": "--constraint",
}


def pip_config() -> list[tuple[str, str]]:
    out = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True
    ).stdout
    pairs = []
    for line in out.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            pairs.append((key.rsplit(".", 1)[-1], shlex.split(value)[0] if value else ""))
    return pairs


def uv_flags(pairs: list[tuple[str, str]]) -> list[str]:
    chosen = dict.fromkeys(
        (FLAGS[key], item) for key, value in pairs if key in FLAGS for item in value.split()
    )
    return [word for pair in chosen for word in pair]


if __name__ == "__main__":
    print(shlex.join(uv_flags(pip_config())))
