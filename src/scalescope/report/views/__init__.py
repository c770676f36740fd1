"""The views: a subject's results in, its document (or page, or frame) out; no analysis, no
file loading."""
