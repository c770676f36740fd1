"""What this node is: its CPU topology, and the software and hardware facts of every run.json."""
