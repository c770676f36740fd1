"""scalescope."""
