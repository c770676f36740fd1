"""Command line: parses, calls one stage entry point, renders. No logic of its own.

One module per group of commands; each registers its commands on the shared ``app`` when
imported, so the order below is the order of ``scalescope --help``.
"""

# isort: off
from scalescope.cli.common import app
from scalescope.cli import training  # noqa: F401  run, bench
from scalescope.cli import reports  # noqa: F401  report, analyze, compare, env
from scalescope.cli import data  # noqa: F401  data pack|stage|bench
from scalescope.cli import measure  # noqa: F401  suite, comm, scale
from scalescope.cli import tune  # noqa: F401  tune
from scalescope.cli import project  # noqa: F401  project
from scalescope.cli import top  # noqa: F401  top
from scalescope.cli import flush  # noqa: F401  flush
# isort: on


def main() -> None:
    app()


__all__ = ["app", "main"]
