"""The fault matrix's multi-host cases (issue 49): three "hosts", each a network namespace on
one bridge with a host name of its own (tests/helpers/netns_hosts.py), one rank each, joined
by ``scalescope run --nnodes 3``; the job is tests/e2e/scripts/pairs_train.py (each rank sends
activations to the next host and receives from the previous one on 2-rank groups, then
all-reduces its gradients over all three). The fault is a slow link: the path between two
hosts only, throttled by tc (htb, both ways) before the job starts, never in its command line
or environment. The pair and the rate are drawn from the seed.

Sizes: unthrottled, veth and gloo move the 1 MiB transfers at ~100 MB/s and more (~10 ms a
step of them); a clear link is throttled to 40-80 Mbit/s (100-200 ms per transfer each way:
10x the step's jitter and more), a marginal one to 300-500 Mbit/s (17-28 ms per transfer)."""

from __future__ import annotations

import random
from dataclasses import dataclass

from cases import SCRIPTS, Case, Truth

PAIRS_TRAIN = SCRIPTS / "pairs_train.py"
HOSTS = 3
CLEAR_MBIT = (40, 80)
MARGINAL_MBIT = (300, 500)


@dataclass(frozen=True)
class Netns:
    """How a multi-host case's arms run: ``hosts`` namespaces, one rank each; the planted
    arm's path between hosts ``pair`` throttled to ``rate`` (tc's units)."""

    hosts: int
    pair: tuple[int, int]
    rate: str


def host_names(hosts: int) -> list[str]:
    return [f"host{i}" for i in range(hosts)]


def netns_cases(rng: random.Random, steps: int) -> list[Case]:
    """A slow link between two of three hosts, clear and marginal."""
    base = ("--steps", str(steps), "--mbytes", "1", "--step-log", "steps.json")
    out = []
    for size, span in (("clear", CLEAR_MBIT), ("marginal", MARGINAL_MBIT)):
        a = rng.randrange(HOSTS)
        pair = (a, (a + 1) % HOSTS)
        rate = f"{rng.randrange(*span)}mbit"
        names = host_names(HOSTS)
        culprit = f"link:{','.join(sorted(names[h] for h in pair))}"
        spec = Netns(HOSTS, pair, rate)
        fault = ("--throttle", f"{names[pair[0]]}-{names[pair[1]]}", "--rate", rate)
        out.append(Case(f"netns-link-{size}", f"multi-host ({HOSTS} netns hosts, p2p + ddp)",
                        PAIRS_TRAIN, base, fault, Truth(culprit, "link", size), ranks=HOSTS,
                        netns=spec))  # fmt: skip
    return out
