"""The run report's point-to-point section: each rank's waiting for its peers and transfers
per step, and the totals per peer (analyze/layouts/p2p.py); only in a run with sends and recvs."""

from __future__ import annotations

from scalescope.analyze import RunAnalysis
from scalescope.analyze.layouts.p2p import P2PAnalysis
from scalescope.report.document import Column, Line, Section, Table
from scalescope.report.formatting import plural
from scalescope.report.views.rank_summary import limited_table

RANK_COLUMNS = (
    Column("rank", align="left"),
    Column("wait", "ms/step"),
    Column("transfer", "ms/step"),
    Column("bytes", "KB/step"),
)
PEER_COLUMNS = (
    Column("rank", align="left"),
    Column("op", align="left"),
    Column("peer", align="left"),
    Column("group", align="left", no_wrap=True),
    Column("calls"),
    Column("bytes", byte_size=True),
    Column("wait", "ms"),
    Column("transfer", "ms"),
)
MEANING = (
    "wait: blocked until the later of the two sides' issues (waiting for the peer, counted as "
    "communication wait); transfer: blocked after it; measured steps"
)


def p2p_section(a: RunAnalysis) -> Section | None:
    p = a.p2p
    if p is None:
        return None
    lines = [Line(f"{plural(p.pairs, 'send')}, each paired with its recv across ranks")]
    if p.unpaired:
        lines.append(Line(f"{p.unpaired:,} of the sends and recvs found no partner (left out)"))
    return Section("Point-to-point", (*lines, _rank_table(p), _peer_table(p)))


def _rank_table(p: P2PAnalysis) -> Table:
    """The ranks that wait most first."""
    ranks = sorted(p.ranks, key=lambda r: (-r.wait_ms_per_step, r.rank))
    values = tuple(
        (r.rank, r.wait_ms_per_step, r.transfer_ms_per_step, r.bytes_per_step / 1e3) for r in ranks
    )
    rows = tuple((str(v[0]), f"{v[1]:,.2f}", f"{v[2]:,.2f}", f"{v[3]:,.1f}") for v in values)
    return limited_table("Point-to-point per rank", RANK_COLUMNS, rows, values, MEANING)


def _peer_table(p: P2PAnalysis) -> Table:
    peers = sorted(p.peers, key=lambda t: (-t.wait_ms, t.rank, t.peer, t.op))
    values = tuple(
        (t.rank, t.op, t.peer, t.group, t.count, t.nbytes, t.wait_ms, t.transfer_ms) for t in peers
    )
    rows = tuple(
        (str(v[0]), v[1], str(v[2]), v[3], f"{v[4]:,}", f"{v[5]:,}", f"{v[6]:,.1f}",
         f"{v[7]:,.1f}")
        for v in values
    )  # fmt: skip
    return limited_table("Point-to-point per peer", PEER_COLUMNS, rows, values, MEANING)
