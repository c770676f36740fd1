"""Where each local rank runs: the ranks placed on the node's cpus, and what each gets."""
