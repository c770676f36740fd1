"""`make gpu-check`: the checks of benchmarks/gpu_check.py, one module per check.

Only ``setup_env`` is imported before the script has moved into the project's virtual
environment, so it uses the standard library alone; the rest import scalescope lazily.
"""
