"""Get into the project's virtual environment before anything imports torch (standard
library only: this runs under whatever python3 started the script).

1. ``.venv`` with scalescope and torch importable: use it.
2. No ``.venv`` but this python has torch (a machine with torch preinstalled): a ``.venv``
   that sees this python's packages (``--system-site-packages``) and an editable install of
   the project (its runtime dependencies, not the dev tools), offline from ``--wheels DIR``
   when given.
3. Otherwise: ``make .venv/.installed``, the Makefile's own recipe (pip installs the pinned
   torch, from ``--wheels DIR`` or the pip cache when there is no network).

Then the script starts again under the venv's python (once: ``GPU_CHECK_IN_VENV``).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv"
VENV_PY = VENV / "bin" / "python"
MARK = "GPU_CHECK_IN_VENV"
PROBE = "import scalescope, torch, torchvision"


def venv_ready(python: Path = VENV_PY) -> bool:
    if not python.exists():
        return False
    return subprocess.run([str(python), "-c", PROBE], capture_output=True).returncode == 0


def pip_env(wheels: Path | None) -> dict[str, str]:
    """pip offline from a wheel directory, when one is given."""
    if wheels is None:
        return dict(os.environ)
    return os.environ | {"PIP_FIND_LINKS": str(wheels), "PIP_NO_INDEX": "1"}


def create_venv(wheels: Path | None, log: list[str]) -> None:
    env = pip_env(wheels)
    if importlib.util.find_spec("torch") is not None:
        log.append(f"creating {VENV} over this python's packages (torch preinstalled)")
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(VENV)],
                       check=True)  # fmt: skip
        install = [str(VENV_PY), "-m", "pip", "install", "--quiet", "-e", str(ROOT)]
        if subprocess.run(install, env=env).returncode != 0:
            log.append("retrying without build isolation (setuptools from this python)")
            subprocess.run([*install, "--no-build-isolation"], check=True, env=env)
        (VENV / ".installed").touch()
        return
    log.append(f"creating {VENV} with the Makefile's recipe (make .venv/.installed)")
    subprocess.run(["make", "-C", str(ROOT), ".venv/.installed"], check=True, env=env)


def ensure_venv(argv: list[str], wheels: Path | None) -> None:
    """Return when running inside a ready venv; else set it up and exec the script in it."""
    if os.environ.get(MARK) == "1" or Path(sys.prefix).resolve() == VENV.resolve():
        return
    log: list[str] = []
    if not venv_ready():
        try:
            create_venv(wheels, log)
        except (OSError, subprocess.CalledProcessError) as exc:
            sys.exit(
                f"gpu-check: setting up {VENV} failed ({exc}); without a network give "
                "--wheels DIR holding torch, torchvision and the project's dependencies"
            )
        if not venv_ready():
            sys.exit(f"gpu-check: {VENV} has no working scalescope/torch after setup ({log})")
    for line in log:
        print(f"setup: {line}", flush=True)
    os.environ[MARK] = "1"
    os.execv(str(VENV_PY), [str(VENV_PY), *argv])
