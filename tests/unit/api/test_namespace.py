"""``import scalescope``: the public names of ``__all__``, imported when first used, so an
analysis machine without torch or pandas imports neither; the tables need no pandas."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from recorded_runs import RUNS

import scalescope

BLOCK_PANDAS = """
import sys
class NoPandas:
    def find_spec(self, name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NoPandas())
"""


def run_python(code: str) -> dict:
    """``code`` in a fresh interpreter; what it printed last, as JSON."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_import_scalescope_imports_neither_torch_nor_pandas() -> None:
    code = (
        "import json, sys, scalescope\n"
        "print(json.dumps({m: m in sys.modules for m in ('torch', 'pandas', 'scalescope.api')}))"
    )
    assert run_python(code) == {"torch": False, "pandas": False, "scalescope.api": False}


def test_every_public_name_resolves() -> None:
    for name in scalescope.__all__:
        assert getattr(scalescope, name) is not None
    assert set(scalescope.__all__) <= set(dir(scalescope))
    try:
        scalescope.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("an unknown name resolved")


def test_loading_the_tables_and_findings_need_neither_pandas_nor_torch() -> None:
    """Without pandas, every table is built, ``frame`` names the extra, and torch stays out
    (a recorded bench run's diagnosis reads its model's FLOPs from the cache or skips them)."""
    code = BLOCK_PANDAS + (
        "import json, scalescope\n"
        f"rec = scalescope.load({str(RUNS / 'straggler_data_2' / 'run')!r})\n"
        "names = ('steps', 'phases', 'collectives', 'waits', 'ranks')\n"
        "rows = {n: getattr(rec, n)().num_rows for n in names}\n"
        "codes = [f.code for f in rec.findings]\n"
        "try:\n    rec.frame('steps'); error = ''\n"
        "except ImportError as exc:\n    error = str(exc)\n"
        "print(json.dumps({'rows': rows, 'error': error, 'torch': 'torch' in sys.modules,"
        " 'pandas': 'pandas' in sys.modules}))"
    )
    out = run_python(code)
    assert all(out["rows"].values())
    assert out["error"] == "Recording.frame needs pandas: pip install 'scalescope[notebook]'"
    assert out["torch"] is False and out["pandas"] is False


NOTEBOOK = Path(sys.prefix) / "notebook"
"""Where ``make test`` installs pandas (the notebook extra) beside the venv, not in it."""


@pytest.mark.skipif(not NOTEBOOK.is_dir(), reason="pandas beside the venv: make test installs it")
def test_frame_is_a_pandas_dataframe_where_pandas_is_installed() -> None:
    code = (
        "import json, sys, scalescope, pandas as pd\n"
        f"rec = scalescope.load({str(RUNS / 'balanced' / 'run')!r})\n"
        "df = rec.frame('ranks')\n"
        "print(json.dumps({'frame': isinstance(df, pd.DataFrame),"
        " 'columns': list(df.columns) == rec.ranks().column_names,"
        " 'rows': len(rec.steps().to_pandas()) == rec.steps().num_rows}))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(NOTEBOOK), *sys.path])}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert json.loads(done.stdout.strip().splitlines()[-1]) == dict.fromkeys(
        ("frame", "columns", "rows"), True
    )
