"""`scalescope flush`: ask a running job's ranks to write what they hold now, as a hang does:
the events they hold and, at ``--record summary``, their flight recorders' rows of the steps
the stream has as summaries only (``events/window-*``, probe/ring_flush.py), which the
what-if then replays beside the regular windows.

A run directory on this node asks through the ranks' state files (this user's own files);
``--connect HOST:PORT`` asks every rank through the job's store, sealed with the user's key
for this job (launch/channel/store.py): the relays beside the ranks ignore a request that
is not.
"""

from __future__ import annotations

from scalescope.commands.common import CommandError, require_run_extra
from scalescope.commands.options.reading import FlushCommand
from scalescope.diagnose.hang_words import rank_ranges
from scalescope.events.run import RunDirError, load_meta
from scalescope.launch.watch.sources import FileSource, StoreSource


def flush(command: FlushCommand) -> int:
    """Ask, wait for the answers; 0 when every rank asked answered, 1 when some did not."""
    if (command.run_dir is None) == (command.connect is None):
        raise CommandError("give a run directory or --connect HOST:PORT (one of them)")
    try:
        source = _source(command)
        states = source.states()
    except (RunDirError, ValueError) as exc:
        raise CommandError(str(exc)) from None
    if command.rank is not None:
        if command.connect:
            raise CommandError("--rank takes a run directory: --connect asks every rank")
        states = {r: s for r, s in states.items() if r == command.rank}
    live = {r: s for r, s in states.items() if not source.ended(r, s)}
    if not live:
        raise CommandError(f"no running rank to ask{_which(command)}")
    silent = source.flush(live, command.wait_s)
    answered = sorted(set(live) - silent)
    if answered:
        print(f"flushed: {_ranks(answered)} (their events; at --record summary their flight "
              "recorders' summarised steps in events/window-*)")  # fmt: skip
    if silent:
        print(f"no answer within {command.wait_s:g} s: {_ranks(sorted(silent))}")
        return 1
    return 0


def _source(command: FlushCommand) -> FileSource | StoreSource:
    if command.connect:
        require_run_extra("flush --connect")
        from scalescope.live.store_view import store_channel

        channel = store_channel(command.connect)
        if not channel.learn_job():
            raise ValueError(f"no job's id in the store at {command.connect} opens with this key")
        return StoreSource(channel, channel.world_size())
    run_dir = command.run_dir
    return FileSource(run_dir, load_meta(run_dir).world_size)  # type: ignore[arg-type]


def _which(command: FlushCommand) -> str:
    return f" (rank {command.rank})" if command.rank is not None else ""


def _ranks(ranks: list[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + rank_ranges(tuple(ranks))
