"""`scalescope data pack|stage|bench`: the input pipeline's shards packed, staged once per
node, and timed against the folder they came from, each with its progress drawn."""

from __future__ import annotations

from scalescope.commands.common import CommandError, err, plain_console
from scalescope.commands.options.data import DataBenchCommand, PackCommand, StageCommand


def pack(command: PackCommand) -> None:
    """Pack the folder into shards with a bar of the bytes written; print the manifest."""
    from scalescope.bench.shard_manifest import parse_size
    from scalescope.data.pack import pack_folder
    from scalescope.report.media.terminal import render_document
    from scalescope.report.renderers import progress, render
    from scalescope.report.subjects import PackedShards

    c = command
    try:
        shard_bytes = parse_size(c.shard_size)
        with progress("bytes")(err, f"packing {c.folder}") as advance:
            manifest = pack_folder(c.folder, c.out, shard_bytes, c.seed, advance)
    except (ValueError, OSError) as exc:
        raise CommandError(str(exc)) from None
    render_document(render(PackedShards(manifest=manifest, out=str(c.out)), "terminal"), err)


def stage(command: StageCommand) -> None:
    """Copy the shards once per node with a bar of the bytes copied; print what was done."""
    from scalescope.data.stage import stage_shards
    from scalescope.report.media.terminal import render_document
    from scalescope.report.renderers import progress, render
    from scalescope.report.subjects import StagedShards

    c = command
    try:
        with progress("bytes")(err, f"staging to {c.dest}") as advance:
            result = stage_shards(c.shards, c.dest, timeout_s=c.timeout_s, progress=advance)
    except (ValueError, OSError) as exc:
        raise CommandError(str(exc)) from None
    render_document(render(StagedShards(result=result, source=str(c.shards)), "terminal"), err)


def bench(command: DataBenchCommand) -> None:
    """Time every path with every worker count, in rounds; print images/s and the ratios."""
    from scalescope.data.speed import measure, one_line, parse_workers, ratios
    from scalescope.report.media.terminal import render_document
    from scalescope.report.renderers import progress, render
    from scalescope.report.subjects import LoaderSpeeds

    c = command
    try:
        counts = parse_workers(c.workers)
        runs = c.rounds * len(c.paths) * len(counts)
        with progress("runs")(err, "timing loaders", runs) as done:
            speeds = measure(list(c.paths), counts, images=c.images, batch_size=c.batch_size,
                             image_size=c.image_size, rounds=c.rounds, cold=c.cold,
                             on_run=done)  # fmt: skip
    except (ValueError, OSError) as exc:
        raise CommandError(one_line(exc)) from None
    measured = LoaderSpeeds(speeds=speeds, ratios=ratios(speeds), cold=c.cold)
    render_document(render(measured, "terminal"), plain_console())
