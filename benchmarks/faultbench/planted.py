"""Runs a case's script with the arguments its arm's file holds, so that the fault never
stands in the recorded command line: ``scalescope run ... planted.py ARM.json``."""

from __future__ import annotations

import json
import runpy
import sys

if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as file:
        arm = json.load(file)
    sys.argv = [arm["script"], *arm["args"]]
    runpy.run_path(arm["script"], run_name="__main__")
