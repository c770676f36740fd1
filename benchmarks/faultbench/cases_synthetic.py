"""The fault matrix's synthetic cases (issue 49): runs of 1,024 ranks from the generator
(benchmarks/synthetic_run.py), too many for this machine to run for real. The truth is what
the generator planted; the gain is measured by regenerating the run without the plant from the
same noise seed (synthetic.py). Targets, sizes, the onset and the noise seeds are drawn from
the matrix's seed, so that nothing is tuned to one draw.

Sizes: a clear slow node or rank computes 15-35 % slower (3x and more the cost the jitter of
1,024 ranks puts on a step: every collective waits for the slowest of them, ~3 sigma of a 3 %
jitter, ~5 ms); a marginal one 3-6 % slower, within that. A slow link is in the pipeline
layout, where pairs of ranks cross it (in the ddp layout every collective spans every link,
and no link can be told apart from a slow network); a heavy stage is in the 3d layout.
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1]
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))

from cases import Case, Truth  # noqa: E402

from synthetic_run import RANKS_PER_NODE, WARMUP_STEPS, Plant, hostnames  # noqa: E402
from synthetic_run import Truth as Planted  # noqa: E402
from synthetic_run import write_run as generate  # noqa: E402

GENERATOR = BENCHMARKS / "synthetic_run.py"
RANKS = 1024
SLOW_CLEAR = (1.15, 1.35)
SLOW_MARGINAL = (1.03, 1.06)
LINK_CLEAR = (3.0, 6.0)
"""The slow link's bandwidth divisor."""
HEAVY_CLEAR = (1.4, 1.8)
"""The heavy stage's blocks against the others' (4 a stage: 6 or 7)."""
MESH = {"pp": 4, "tp": 8, "micro": 8}
"""The 3d layout's mesh at 1,024 ranks: dp 32."""


@dataclass(frozen=True)
class Synthetic:
    """How a synthetic case's runs are generated: the planted arm with ``plant``, the clean
    arm without it, pair ``i`` of both from noise seed ``seed + i``."""

    ranks: int
    steps: int
    seed: int
    plant: Plant | None
    layout: str = "ddp"

    def write(self, path: Path, planted: bool, pair: int = 0) -> Planted:
        """One arm's run directory at ``path``; the generator's truth."""
        mesh = MESH if self.layout == "3d" else {}
        plant = self.plant if planted else None
        return generate(path, self.ranks, self.steps, plant, self.seed + pair,
                        layout=self.layout, **mesh)  # fmt: skip


def culprit(plant: Plant, ranks: int, layout: str = "ddp") -> str:
    """The culprit as the verdict names it: ``node:HOST``, ``rank:N``, ``link:A,B`` (the host
    with the link to the next node first) or ``stage:N``."""
    names = hostnames(ranks)
    if plant.kind == "slow_node":
        return f"node:{names[plant.target]}"
    if plant.kind == "slow_link":
        return f"link:{names[plant.target]},{names[(plant.target + 1) % len(names)]}"
    if plant.kind == "heavy_stage":
        return f"stage:{plant.target}"
    return f"rank:{plant.target}"


CAUSES = {"slow_node": "straggler", "slow_rank": "straggler", "slow_link": "link",
          "heavy_stage": "pipeline stage"}  # fmt: skip
"""The cause class (cases.CLASSES' values) of each plant."""


def synthetic_case(name: str, spec: Synthetic, size: str) -> Case:
    """A case of ``spec``; its fault is the plant as the generator's arguments would say it
    (what the report shows; the runner generates from ``spec``)."""
    p = spec.plant
    args = ("--ranks", str(spec.ranks), "--steps", str(spec.steps), "--seed", str(spec.seed),
            "--layout", spec.layout)  # fmt: skip
    if p is None:
        truth, fault = Truth(None, "none", "none"), ()
    else:
        truth = Truth(culprit(p, spec.ranks, spec.layout), CAUSES[p.kind], size)
        fault = ("--plant", p.kind, "--target", str(p.target), "--factor", f"{p.factor:g}")
        fault += ("--from-step", str(p.from_step)) if p.from_step else ()
    layout = f"synthetic {spec.layout}, {spec.ranks:,} ranks"
    return Case(name, layout, GENERATOR, args, fault, truth, ranks=spec.ranks,
                warmup_steps=WARMUP_STEPS, since=p.from_step if p else 0,
                synthetic=spec)  # fmt: skip


def _factor(rng: random.Random, span: tuple[float, float]) -> float:
    return round(rng.uniform(*span), 2)


def synthetic_cases(rng: random.Random, steps: int, ranks: int = RANKS) -> list[Case]:
    """Jitter only (twice), a slow node and a slow rank (clear and marginal), a slow link, a
    heavy stage and a slow rank from mid-run, each with its own noise seed."""
    nodes = ranks // RANKS_PER_NODE

    def spec(plant: Plant | None, layout: str = "ddp") -> Synthetic:
        return Synthetic(ranks, steps, rng.randrange(1_000_000), plant, layout)

    def node(span: tuple[float, float]) -> Plant:
        return Plant("slow_node", rng.randrange(1, nodes), _factor(rng, span))

    def rank(span: tuple[float, float], since: int = 0) -> Plant:
        return Plant("slow_rank", rng.randrange(1, ranks), _factor(rng, span), from_step=since)

    onset = rng.randrange(steps // 3, steps // 2)
    return [
        synthetic_case("syn-none-0", spec(None), "none"),
        synthetic_case("syn-none-1", spec(None), "none"),
        synthetic_case("syn-node-clear", spec(node(SLOW_CLEAR)), "clear"),
        synthetic_case("syn-node-marginal", spec(node(SLOW_MARGINAL)), "marginal"),
        synthetic_case("syn-rank-clear", spec(rank(SLOW_CLEAR)), "clear"),
        synthetic_case("syn-rank-marginal", spec(rank(SLOW_MARGINAL)), "marginal"),
        synthetic_case(
            "syn-link-clear",
            spec(
                Plant("slow_link", rng.randrange(nodes - 1), _factor(rng, LINK_CLEAR)), "pipeline"
            ),
            "clear",
        ),  # fmt: skip
        synthetic_case(
            "syn-stage-clear",
            spec(Plant("heavy_stage", rng.randrange(MESH["pp"]), _factor(rng, HEAVY_CLEAR)), "3d"),
            "clear",
        ),  # fmt: skip
        synthetic_case("syn-rank-midrun", spec(rank(SLOW_CLEAR, onset)), "clear"),
    ]
