"""What every command's journey shares: the consoles it prints on and the error it refuses
with (cli/ turns a ``CommandError`` into ``error: MESSAGE`` and the exit code)."""

from __future__ import annotations

from rich.console import Console

from scalescope.bench.extras import IMAGES, RUN_EXTRA, TORCH, WORKLOADS, missing

err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)
"""Standard error: progress, ``wrote PATH``, where a run or study was kept. Markup off: paths,
script arguments and error messages may hold ``[`` ``]``; they print verbatim."""


def plain_console() -> Console:
    """Standard output with markup off, so recorded strings print verbatim."""
    return Console(highlight=False, markup=False)


class CommandError(Exception):
    """A command refused its options or could not go on: one line for the user, an exit
    code (2: bad options or nothing to work on; 1: the work ran but failed)."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


NEEDS = {
    "bench": WORKLOADS, "suite": WORKLOADS, "tune": WORKLOADS, "scale": WORKLOADS,
    "data pack": IMAGES, "data bench": IMAGES,
}  # fmt: skip
"""The modules of the ``run`` extra a command imports, where more than torch."""


def require_run_extra(command: str) -> None:
    """Refuse ``scalescope COMMAND`` in one line where a module of the ``run`` extra that it
    imports is missing: an analysis-only install (``pip install scalescope``) reads runs and
    traces but launches nothing."""
    package = missing(NEEDS.get(command, TORCH))
    if package is not None:
        raise CommandError(f"scalescope {command} needs {package}: {RUN_EXTRA}")


def int_list(text: str | None, flag: str) -> tuple[int, ...] | None:
    """Numbers given as 1,2,4; a CommandError naming ``flag`` otherwise."""
    if text is None:
        return None
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise CommandError(f"{flag} takes numbers like 1,2,4, got {text!r}") from None


def launch_error(exc: ValueError) -> CommandError:
    """A launch refused or cut short, as the command's error: exit code 1 when the ranks ran
    but the run's end was not recorded, else 2."""
    from scalescope.launch.run.runner import RunEndNotWritten

    return CommandError(str(exc), 1 if isinstance(exc, RunEndNotWritten) else 2)
