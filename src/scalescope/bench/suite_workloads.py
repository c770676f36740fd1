"""The workloads of ``scalescope suite``: what each runs, its size parameter and its units.

A CORAL-2 style mix on one cluster: deep learning (a CNN, an RNN, a transformer block) and
analytics (PCA, K-Means, SVM). ``--quick`` uses tiny sizes and few steps so the whole suite
runs in CI in well under three minutes on two cores.
"""

from __future__ import annotations

from dataclasses import dataclass

DEEP_LEARNING = "deep learning"
ANALYTICS = "analytics"


@dataclass(frozen=True)
class SuiteWorkload:
    name: str
    family: str
    module: str
    """The module every rank runs (``python -m MODULE ARGS``)."""
    size_flag: str
    """The workload's size parameter, as its own flag."""
    size_help: str
    default_size: int
    quick_size: int
    args: tuple[str, ...]
    quick_args: tuple[str, ...]
    warmup_steps: int
    """Steps the analysis leaves out (the workload's own warm-up)."""

    def argv(self, size: int, quick: bool) -> list[str]:
        return [*self.args[:1], f"{self.size_flag}={size}", *self.args[1:]] + list(
            self.quick_args if quick else ()
        )


_TRAIN = ("--steps=30", "--warmup-steps=3")
_TRAIN_QUICK = ("--steps=4", "--warmup-steps=1")
_SEQ_QUICK = (*_TRAIN_QUICK, "--seq-len=16", "--vocab=200", "--batch-size=4")

WORKLOADS: tuple[SuiteWorkload, ...] = (
    SuiteWorkload(
        "resnet50", DEEP_LEARNING, "scalescope.bench.workload", "--image-size",
        "image height and width", 224, 32,
        ("resnet50", "--batch-size=32", *_TRAIN, "--display-every=1000"),
        (*_TRAIN_QUICK, "--batch-size=2", "--num-classes=10"), 1,
    ),
    SuiteWorkload(
        "lstm", DEEP_LEARNING, "scalescope.bench.sequence_workload", "--hidden",
        "hidden size", 256, 32, ("lstm", *_TRAIN), _SEQ_QUICK, 1,
    ),
    SuiteWorkload(
        "transformer", DEEP_LEARNING, "scalescope.bench.sequence_workload", "--hidden",
        "model width", 256, 32, ("transformer", *_TRAIN), _SEQ_QUICK, 1,
    ),
    SuiteWorkload(
        "pca", ANALYTICS, "scalescope.bench.analytics_workload", "--rows",
        "rows", 500_000, 4_000, ("pca",), ("--features=8", "--components=3", "--repeats=2"), 0,
    ),
    SuiteWorkload(
        "kmeans", ANALYTICS, "scalescope.bench.analytics_workload", "--rows",
        "rows", 500_000, 4_000, ("kmeans",),
        ("--features=4", "--clusters=4", "--iterations=5", "--chunk-rows=1024"), 0,
    ),
    SuiteWorkload(
        "svm", ANALYTICS, "scalescope.bench.analytics_workload", "--rows",
        "rows", 500_000, 4_000, ("svm",), ("--features=8", "--batch-size=64"), 1,
    ),
)  # fmt: skip

BY_NAME = {w.name: w for w in WORKLOADS}


def select_workloads(names: str | None) -> tuple[SuiteWorkload, ...]:
    """The workloads named in a comma list (all when None), in the suite's order."""
    if names is None:
        return WORKLOADS
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in BY_NAME]
    if unknown or not wanted:
        shown = ", ".join(repr(n) for n in unknown) or repr(names)
        raise ValueError(f"unknown workload {shown}; valid: {', '.join(BY_NAME)}")
    return tuple(w for w in WORKLOADS if w.name in wanted)


def parse_sizes(items: list[str]) -> dict[str, int]:
    """``NAME=VALUE`` pairs of --size into sizes by workload name."""
    sizes = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or name not in BY_NAME:
            raise ValueError(
                f"--size takes WORKLOAD=N with WORKLOAD one of {', '.join(BY_NAME)}, got {item!r}"
            )
        try:
            size = int(value)
        except ValueError:
            size = 0
        if size < 1:
            raise ValueError(f"--size {item!r}: the size must be a positive whole number")
        sizes[name] = size
    return sizes


def parse_ranks(text: str) -> tuple[int, ...]:
    """``1,2,4`` into sorted, distinct rank counts."""
    try:
        ranks = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        ranks = []
    if not ranks or ranks[0] < 1:
        raise ValueError(f"--ranks takes positive rank counts like 1,2,4, got {text!r}")
    return tuple(ranks)
