"""The live watch of a run in progress: a run directory polled (``run_view.LiveTop``), the
job's store polled (``store_view.StoreTop``), and the redraw loop with its keys or the
background thread of ``run --live`` (``terminal``). ``scalescope top`` and ``run --live`` are
thin journeys over it; the live-alert work builds on it."""
