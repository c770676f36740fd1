"""The opt-in API of training scripts: the knob values of the current tune trial."""

from __future__ import annotations

import json
import os
from typing import Any

KNOBS_ENV = "SCALESCOPE_TUNE_KNOBS"


def knobs(defaults: dict[str, Any] | None = None) -> dict[str, Any]:
    """``defaults`` updated with the values ``scalescope tune`` chose for this trial.

    Outside a trial it returns ``defaults`` unchanged, so a script reads its settings the
    same way with and without tune::

        k = scalescope.tune.knobs({"workers": 2, "pin_memory": False, "channels_last": False})
        loader = DataLoader(data, num_workers=k["workers"], pin_memory=k["pin_memory"])
    """
    values = dict(defaults or {})
    text = os.environ.get(KNOBS_ENV, "")
    if text:
        try:
            chosen = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{KNOBS_ENV} is not a JSON object: {exc}") from exc
        if not isinstance(chosen, dict):
            raise ValueError(f"{KNOBS_ENV} is not a JSON object: {text!r}")
        values.update(chosen)
    return values
