"""Small real image folders (JPEGs written with PIL) for the data tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image


def make_image_folder(
    root: Path, classes: int = 3, per_class: int = 8, size: int = 32, seed: int = 0
) -> Path:
    """``root/c<k>/<i>.jpg``: noisy JPEGs whose mean colour tells the class apart."""
    rng = np.random.default_rng(seed)
    for k in range(classes):
        folder = root / f"c{k}"
        folder.mkdir(parents=True, exist_ok=True)
        base = np.array([(80 * k) % 256, 255 - 60 * k % 256, 40 + 50 * k % 200], dtype=float)
        for i in range(per_class):
            noise = rng.normal(0, 30, (size, size, 3))
            pixels = np.clip(base + noise, 0, 255).astype(np.uint8)
            Image.fromarray(pixels).save(folder / f"{i}.jpg", quality=90)
    return root
