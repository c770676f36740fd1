"""The ranks' live states as Prometheus metrics: served, pushed, labelled, written."""
