"""The data tools of `scalescope data`: pack small files into tar shards, stage them once per
node, and measure how fast a folder or shards feed the training loop (warm or cold cache)."""
