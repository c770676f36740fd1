"""Built-in training workload behind `scalescope bench`: models, data, throughput, the script."""
