"""Tune: search the knobs of a workload by short real trials (``scalescope tune``).

Scripts opt in to the workload knobs (DataLoader, memory format, autocast, batch) with
``scalescope.tune.knobs()``; DDP's bucket size, bucket views and compression hook reach any
script through the probe. See docs/tune.md.
"""

from scalescope.tune.api import knobs

__all__ = ["knobs"]
