"""The launch options, declared once (with launch/options/fields.py): the groups a launching
command takes (rendezvous, placement, recording, the watches, the end, the output), each field
its flag; commands, api/ and the launcher use the same objects.

Kept free of torch and of the launcher's heavy modules: every command line builds them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from scalescope.events.flight_ring import DEFAULT_ROWS
from scalescope.launch.options.fields import HTML, RUN_DIR, group, option
from scalescope.probe.windows import DEFAULT_LEVEL, FULL, LEVELS

if TYPE_CHECKING:
    from scalescope.analyze.watch.hang import HangReport

RENDEZVOUS, PLACEMENT, RECORDING, OUTPUT = "Rendezvous", "Placement", "Recording", "Output"
HANG_ACTIONS = ("report", "kill")


@dataclass(frozen=True, kw_only=True)
class Rendezvous:
    """Where the ranks meet: rank 0's address and port (group ``rendezvous``) and, for several
    nodes, torchrun's rendezvous (group ``nodes``)."""

    master_addr: str | None = option("--master-addr", panel=RENDEZVOUS)
    """Address of rank 0 (default: 127.0.0.1; under srun/mpirun found from the launcher)."""
    master_port: int | None = option("--master-port", panel=RENDEZVOUS)
    """Port of the rendezvous (default: free; under srun/mpirun derived from the job id)."""
    nnodes: int = option("--nnodes", default=1, panel=RENDEZVOUS, min=1)
    """Nodes in the job (torchrun-style)."""
    node_rank: int = option("--node-rank", default=0, panel=RENDEZVOUS, min=0)
    """This node's index."""
    rdzv_endpoint: str | None = option("--rdzv-endpoint", panel=RENDEZVOUS)
    """HOST[:PORT] of the rendezvous."""
    rdzv_backend: str = option("--rdzv-backend", default="c10d", panel=RENDEZVOUS)
    """c10d or static."""
    rdzv_id: str = option("--rdzv-id", default="", panel=RENDEZVOUS)
    """Job id shared by all nodes."""
    local_addr: str | None = option("--local-addr", panel=RENDEZVOUS)
    """This node's address for the others."""

    def __post_init__(self) -> None:
        if self.master_port is not None and not 0 < self.master_port < 65536:
            raise ValueError(f"--master-port must be in 1..65535, got {self.master_port}")
        if self.nnodes < 1 or not 0 <= self.node_rank < self.nnodes:
            raise ValueError(
                f"--node-rank must be in 0..{self.nnodes - 1} for --nnodes {self.nnodes}, "
                f"got {self.node_rank}"
            )
        if self.nnodes > 1 and not self.rdzv_endpoint:
            raise ValueError("several nodes need --rdzv-endpoint HOST:PORT of the rendezvous")
        if self.rdzv_backend not in ("c10d", "static"):
            raise ValueError(f"--rdzv-backend must be c10d or static, got {self.rdzv_backend!r}")

    @property
    def address(self) -> str:
        """Rank 0's address on this machine: --master-addr, or 127.0.0.1."""
        return self.master_addr or "127.0.0.1"


class MappingError(ValueError):
    """A placement that cannot run as asked (by these options or on this node's cpus,
    launch/placement/mapping.py); the message says what to change."""


@dataclass(frozen=True, kw_only=True)
class MappingOptions:
    """How ranks are placed on this node's cores (mpirun's --map-by and --bind-to)."""

    map_by: str = option("--map-by", default="numa", panel=PLACEMENT)
    """Domains to spread ranks over: node, socket, numa, core."""
    threads_per_rank: int | None = option("--threads-per-rank", panel=PLACEMENT, min=1)
    """Threads per rank (default: its cores)."""
    numa_nodes: str | None = option("--numa-nodes", panel=PLACEMENT)
    """Use only these NUMA nodes, e.g. 0,1."""
    cpu_list: tuple[str, ...] | None = option("--cpu-list", panel=PLACEMENT)
    """Cpus of one rank (repeat per rank), e.g. 0-11."""
    oversubscribe: bool = option("--oversubscribe", default=False, panel=PLACEMENT)
    """Allow more threads than cores."""
    no_bind: bool = option("--no-bind", default=False, panel=PLACEMENT)
    """Do not bind ranks to cpus."""
    bind_to: str = option("--bind-to", default="domain", panel=PLACEMENT)
    """domain: the rank's NUMA node/socket; core: its own cores."""
    allocator: str = option("--allocator", default="default", panel=PLACEMENT)
    """tcmalloc, jemalloc or default."""

    def __post_init__(self) -> None:
        if self.bind_to not in ("domain", "core"):
            raise MappingError(f"--bind-to must be domain or core, got {self.bind_to!r}")
        self.numa_node_ids  # noqa: B018  refused here, with its flag

    @property
    def numa_node_ids(self) -> tuple[int, ...] | None:
        """--numa-nodes read: 0,1 -> (0, 1); None: every node."""
        numa = self.numa_nodes
        try:
            return tuple(int(n) for n in numa.split(",")) if numa else None
        except ValueError as exc:
            raise ValueError(f"--numa-nodes takes numbers like 0,1, got {numa!r}") from exc

    @property
    def bind(self) -> bool:
        return not self.no_bind


@dataclass(frozen=True, kw_only=True)
class Recording:
    """What is recorded, and whether anything starts."""

    dry_run: bool = option("--dry-run", default=False, panel=RECORDING)
    """Print the placement plan and start nothing."""
    report_bindings: bool = option("--report-bindings", default=False, panel=RECORDING)
    """Each rank prints its binding."""
    run_dir: Path | None = RUN_DIR(panel=RECORDING)
    """Where to record (default: scalescope_runs/…)."""
    no_probe: bool = option("--no-probe", default=False, panel=RECORDING)
    """Run without instrumentation (for A/B)."""
    ring_rows: int = option("--ring-rows", default=DEFAULT_ROWS, panel=RECORDING, min=0)
    """Rows each rank's flight recorder keeps (its last calls, read after a kill, a crash
    or a hang; 80 B a row); 0: none."""
    record: str = option("--record", default=DEFAULT_LEVEL, panel=RECORDING, metavar="LEVEL")
    """summary: per step and (group, op, size class) the calls' count, bytes and time (under
    2 KB a rank-step), with every call's row for the first 10 steps and 4 steps in every 100
    (the what-if replays those); full: a row per collective call (every step replayable)."""

    no_node_files: bool = option("--no-node-files", default=False, panel=RECORDING)
    """Write no node files: by default each node's relay writes, every 500 steps, its ranks'
    step times and per-group collective statistics to RUN_DIR/node_events (what `report`
    analyses a run of many ranks from; under 1 % of a core a node)."""

    def __post_init__(self) -> None:
        if self.record not in LEVELS:
            raise ValueError(f"--record must be full or summary, got {self.record!r}")

    def every_call(self) -> Recording:
        """The same, with every call's row written (``--record full``)."""
        return replace(self, record=FULL)


@dataclass(frozen=True, kw_only=True)
class HangOptions:
    """What the launcher's watch does on a hang (launch/watch/hang.py) or a slowdown
    (launch/watch/slowdown.py)."""

    after_s: float | None = option("--hang-after", panel=RECORDING)
    """Seconds without a finished step or collective on any rank before a hang is reported
    (default: 10 typical steps, at least 30)."""
    action: str = option("--hang-action", default="report", panel=RECORDING)
    """On a hang: report (stacks, hang.json; stop nothing) or kill (then stop the ranks)."""
    slowdown_pct: float = option("--slowdown-threshold", default=10.0, panel=RECORDING)
    """Alert when the step gets this much slower (%) and stays so: in the launcher's log,
    RUN_DIR/alerts.jsonl, `top` and the report (0: no slowdown watch)."""
    on_slowdown: str | None = option("--on-slowdown", panel=RECORDING, metavar="CMD")
    """Run CMD (by the shell, not waited for) on each slowdown alert and recovery, with the
    alert as JSON in $SCALESCOPE_ALERT and the run directory in $SCALESCOPE_RUN_DIR."""
    metrics_port: int | None = option("--metrics-port", panel=RECORDING, min=1, max=65535)
    """Serve the run's live metrics (OpenMetrics, for Prometheus) on this port while it
    trains: per rank steps, step and phase seconds, samples, time in collectives; slowdown
    alerts; the hang state."""
    metrics_addr: str = option("--metrics-addr", default="127.0.0.1", panel=RECORDING)
    """The address the metrics endpoint binds to (0.0.0.0: every interface)."""
    metrics_push: str | None = option("--metrics-push", panel=RECORDING, metavar="URL")
    """Also push the metrics to this Prometheus Pushgateway, every --metrics-push-every
    seconds and once at the end."""
    metrics_push_every_s: float = option("--metrics-push-every", default=15.0, panel=RECORDING)
    """Seconds between two pushes to --metrics-push."""
    metrics_per: str = option("--metrics-per", default="auto", panel=RECORDING)
    """rank (series per rank), node (summed per node) or auto (per rank up to 256 ranks,
    per node beyond: a scrape of 1,024 ranks' series costs the watch ~150 ms of CPU)."""
    render: Callable[[HangReport], str] | None = None
    """Words for the report (api/launching.py gives report/views/hang's); None writes
    hang.json only."""

    @property
    def metrics(self) -> bool:
        return self.metrics_port is not None or self.metrics_push is not None

    def __post_init__(self) -> None:
        if self.after_s is not None and self.after_s <= 0:
            raise ValueError(f"--hang-after must be > 0 seconds, got {self.after_s}")
        if not 0 <= self.slowdown_pct <= 1000:
            raise ValueError(
                f"--slowdown-threshold must be 0 (off) to 1000 %, got {self.slowdown_pct}"
            )
        if self.on_slowdown is not None and not self.on_slowdown.strip():
            raise ValueError("--on-slowdown needs a command")
        if self.metrics_per not in ("rank", "node", "auto"):
            raise ValueError(f"--metrics-per must be rank, node or auto, got {self.metrics_per!r}")
        if self.metrics_push_every_s <= 0:
            raise ValueError(
                f"--metrics-push-every must be > 0 seconds, got {self.metrics_push_every_s}"
            )
        push = self.metrics_push
        if push is not None and not push.startswith(("http://", "https://")):
            raise ValueError(f"--metrics-push takes an http(s) URL, got {push!r}")
        if self.action not in HANG_ACTIONS:
            raise ValueError(f"--hang-action must be report or kill, got {self.action!r}")


@dataclass(frozen=True, kw_only=True)
class AtEnd:
    """What this process does when the run has ended."""

    no_report: bool = option("--no-report", default=False, panel=RECORDING)
    """Do not print the report at the end."""
    html: Path | None = HTML(panel=RECORDING)
    """Also write the HTML dashboard of the run here."""


@dataclass(frozen=True, kw_only=True)
class Terminal:
    """What of the ranks' output reaches this terminal."""

    live: bool = option("--live", default=False, panel=OUTPUT)
    """Show the live view (scalescope top) here while it trains; the ranks' output goes to
    RUN_DIR/logs, its last lines below the view."""
    label_output: bool = option("--label-output", default=False, panel=OUTPUT)
    """Prefix each line of the ranks' output with \\[rank N] (whole lines, never cut or
    glued)."""
    ranks_output: str | None = option("--ranks-output", panel=OUTPUT)
    """Only these ranks' output on the terminal, e.g. 0; every rank's is kept in
    RUN_DIR/logs."""

    def __post_init__(self) -> None:
        self.ranks  # noqa: B018  refused here, with its flag

    @property
    def ranks(self) -> tuple[int, ...] | None:
        """--ranks-output read: 0,3 -> (0, 3); None: every rank."""
        shown = self.ranks_output
        wrong = ValueError(f"--ranks-output takes ranks like 0 or 0,3, got {shown!r}")
        try:
            ranks = tuple(int(r) for r in shown.split(",") if r.strip()) if shown else None
        except ValueError as exc:
            raise wrong from exc
        if ranks == ():
            raise wrong
        if ranks is not None and any(r < 0 for r in ranks):
            raise ValueError(f"--ranks-output takes ranks >= 0, got {shown}")
        return ranks


GROUPS: dict[str, tuple[str, tuple[str, ...]]] = {
    "rendezvous": ("rendezvous", ("master_addr", "master_port")),
    "nodes": (
        "rendezvous",
        ("nnodes", "node_rank", "rdzv_endpoint", "rdzv_backend", "rdzv_id", "local_addr"),
    ),
    "placement": ("mapping", tuple(f.name for f in fields(MappingOptions))),
    "recording": ("recording", tuple(f.name for f in fields(Recording))),
    "hang": (
        "hang",
        (
            "after_s",
            "action",
            "slowdown_pct",
            "on_slowdown",
            "metrics_port",
            "metrics_addr",
            "metrics_push",
            "metrics_push_every_s",
            "metrics_per",
        ),
    ),
    "report": ("at_end", tuple(f.name for f in fields(AtEnd))),
    "output": ("terminal", tuple(f.name for f in fields(Terminal))),
}
"""The groups a command takes (``cli``'s ``launch_groups``): each a field of ``LaunchConfig``
and the options of it in the group."""


@dataclass(frozen=True, kw_only=True)
class LaunchConfig:
    """Every launch option, by group; a command that does not take one has its default."""

    GROUPS: ClassVar[dict[str, tuple[str, tuple[str, ...]]]] = GROUPS

    rendezvous: Rendezvous = group(Rendezvous)
    mapping: MappingOptions = group(MappingOptions)
    recording: Recording = group(Recording)
    hang: HangOptions = group(HangOptions)
    at_end: AtEnd = group(AtEnd)
    terminal: Terminal = group(Terminal)

    def __post_init__(self) -> None:
        hang = self.hang
        if self.recording.no_probe and (hang.after_s is not None or hang.action != "report"):
            raise ValueError(
                "--hang-after and --hang-action need the probe (the hang watch reads the ranks' "
                "live states): drop --no-probe, or them"
            )
        if self.recording.no_probe and hang.on_slowdown is not None:
            raise ValueError(
                "--on-slowdown needs the probe (the slowdown watch reads the ranks' live "
                "states): drop --no-probe, or it"
            )
        if self.recording.no_probe and hang.metrics:
            raise ValueError(
                "--metrics-port and --metrics-push need the probe (the metrics are the ranks' "
                "live states): drop --no-probe, or them"
            )


ALL_GROUPS = tuple(GROUPS)
