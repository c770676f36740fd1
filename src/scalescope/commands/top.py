"""`scalescope top`: watch a run directory (live/run_view.py) or the job's store
(live/store_view.py) until q, Ctrl-C or, off a terminal, the run's end."""

from __future__ import annotations

from rich.console import Console

from scalescope.commands.common import CommandError, require_run_extra
from scalescope.commands.options.reading import TopCommand
from scalescope.events.run import RunDirError
from scalescope.live.run_view import FINDING_EVERY_S, LiveTop
from scalescope.live.store_view import StoreTop, store_top
from scalescope.live.terminal import watch


def top(command: TopCommand) -> int:
    """Watch a run directory or the job's store until q, Ctrl-C or, off a terminal, the run's
    end; the exit code (130 after Ctrl-C)."""
    if (command.run_dir is None) == (command.connect is None):
        raise CommandError("give a run directory or --connect HOST:PORT (one of them)")
    console = Console(highlight=False)
    try:
        view: LiveTop | StoreTop
        if command.connect:
            require_run_extra("top --connect")
            view = store_top(command.connect)
        else:
            every_s = 0.0 if command.once else FINDING_EVERY_S
            view = LiveTop(command.run_dir, finding_every_s=every_s)  # type: ignore[arg-type]
        if command.once:
            console.print(view.frame())
            return 0
        return watch(view, console)
    except (RunDirError, ValueError) as exc:
        raise CommandError(str(exc)) from None
