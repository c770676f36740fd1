"""One profiled run from start to end: how to start it (local, or one rank of an external
launcher's world), its run directory and run.json, the watches beside it."""
