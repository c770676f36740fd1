"""Test helper (not a test module): how the diagnosis must name a straggler's phase, for the
stragglers of tests/e2e/scripts/ddp_train.py (``--sleep-where``), live or recorded."""

WHERE = {
    "data": ("in data", "rank 1 is late loading data"),
    "forward": ("in forward", "rank 1 is late in forward"),
    "backward": ("in backward", "rank 1 is late in backward"),
    "optimizer": ("in optimizer", "rank 1 is late in optimizer"),
    "outside": ("outside the recorded phases", "time outside the recorded phases of rank 1"),
}
"""Where rank 1 sleeps: how its finding's evidence and summary name the phase."""
OUTSIDE = "between the optimizer step and the next batch"
"""Where the time outside every phase is, in the words of its finding."""
