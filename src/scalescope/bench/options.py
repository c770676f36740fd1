"""Options of ``scalescope bench``, checked before any rank starts."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True, kw_only=True)
class BenchOptions:
    model: str
    batch_size: int = 32
    image_size: int = 224
    steps: int | None = None
    epochs: int | None = None
    warmup_steps: int = 5
    lr: float = 0.01
    channels_last: bool = False
    bf16: bool = False
    bucket_cap_mb: float = 25.0
    seed: int = 0
    data: Path | None = None
    workers: int | None = None
    pin_memory: bool = False

    def __post_init__(self) -> None:
        from scalescope.bench.data import validate_data
        from scalescope.bench.models import validate_model

        validate_model(self.model)
        if self.steps is not None and self.epochs is not None:
            raise ValueError("give --steps or --epochs, not both")
        if self.data is not None:
            validate_data(self.data)

    def workload_args(self) -> list[str]:
        """The same options as arguments of ``python -m scalescope.bench.workload``."""
        args = [
            self.model,
            f"--batch-size={self.batch_size}",
            f"--image-size={self.image_size}",
            f"--warmup-steps={self.warmup_steps}",
            f"--lr={self.lr}",
            f"--bucket-cap-mb={self.bucket_cap_mb}",
            f"--seed={self.seed}",
        ]
        optional = {
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
        }
        return args + [flag for flag, on in flags.items() if on]

    def as_dict(self) -> dict[str, Any]:
        values = asdict(self)
        values["data"] = str(self.data) if self.data else None
        return values
