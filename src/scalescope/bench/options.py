"""Options of ``scalescope bench``, checked before any rank starts."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

DEFAULT_BATCH = 32
"""Images per rank per step."""


@dataclass(frozen=True, kw_only=True)
class BenchOptions:
    model: str
    batch_size: int | None = None
    """Per rank; None: 32, or --global-batch split over the ranks."""
    global_batch: int | None = None
    recipe: str | None = None
    image_size: int = 224
    steps: int | None = None
    epochs: int | None = None
    warmup_steps: int = 5
    lr: float | None = None
    """None: 0.01, or the recipe's base rate."""
    channels_last: bool = False
    bf16: bool = False
    bucket_cap_mb: float = 25.0
    fsdp: bool = False
    """FSDP2 (fully_shard per block) instead of DDP."""
    seed: int = 0
    data: Path | None = None
    workers: int | None = None
    pin_memory: bool = False

    def __post_init__(self) -> None:
        from scalescope.bench.data_check import validate_data
        from scalescope.bench.models import validate_model

        validate_model(self.model)
        if self.steps is not None and self.epochs is not None:
            raise ValueError("give --steps or --epochs, not both")
        if self.batch_size is not None and self.global_batch is not None:
            raise ValueError("give --batch-size (per rank) or --global-batch, not both")
        if self.recipe is not None:
            from scalescope.recipes import get_recipe

            get_recipe(self.recipe)
        if self.lr is not None and not self.lr > 0:
            raise ValueError(f"--lr must be positive, got {self.lr}")
        if self.fsdp and self.channels_last:
            raise ValueError(FSDP_CHANNELS_LAST)
        if self.data is not None:
            validate_data(self.data)

    def check_world(self, world_size: int) -> None:
        """ValueError if --global-batch does not split over ``world_size`` ranks."""
        per_rank_batch(self.batch_size, self.global_batch, world_size)

    def workload_args(self) -> list[str]:
        """The same options as arguments of ``python -m scalescope.bench.workload``."""
        args = [
            self.model,
            f"--image-size={self.image_size}",
            f"--warmup-steps={self.warmup_steps}",
            f"--bucket-cap-mb={self.bucket_cap_mb}",
            f"--seed={self.seed}",
        ]
        optional = {
            "--batch-size": self.batch_size,
            "--global-batch": self.global_batch,
            "--recipe": self.recipe,
            "--lr": self.lr,
            "--steps": self.steps,
            "--epochs": self.epochs,
            "--workers": self.workers,
            "--data": self.data.resolve() if self.data else None,
        }
        args += [f"{flag}={value}" for flag, value in optional.items() if value is not None]
        flags = {
            "--channels-last": self.channels_last,
            "--bf16": self.bf16,
            "--pin-memory": self.pin_memory,
            "--fsdp": self.fsdp,
        }
        return args + [flag for flag, on in flags.items() if on]

    def as_dict(self) -> dict[str, Any]:
        values = asdict(self)
        values["data"] = str(self.data) if self.data else None
        return values


FSDP_CHANNELS_LAST = (
    "--channels-last does not go with --fsdp: FSDP2 cannot shard the non-contiguous "
    "parameters channels_last makes"
)


def per_rank_batch(batch_size: int | None, global_batch: int | None, world_size: int) -> int:
    """Images per rank per step: --batch-size, or --global-batch split over the ranks."""
    if global_batch is None:
        return batch_size or DEFAULT_BATCH
    if batch_size is not None:
        raise ValueError("give --batch-size (per rank) or --global-batch, not both")
    if global_batch % world_size:
        raise ValueError(
            f"--global-batch {global_batch} does not split evenly over {world_size} ranks"
        )
    return global_batch // world_size
