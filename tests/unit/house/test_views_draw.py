"""Views draw; they compute nothing. A view imports no numpy (an array to reduce is analysis,
done below report/), and the commands and the live watch reach a view only through the one
registry (report/renderers.py). tests/unit/house/test_layers.py holds the rest of the rule: no
function of the result layers in report/ but words."""

from __future__ import annotations

import ast

from test_layers import SRC, import_graph, module_name, package


def numpy_importers(sources: dict[str, str]) -> list[str]:
    """The modules (name -> source) with any import of numpy, lazy or type-only too."""
    found = set()
    for module, source in sources.items():
        for node in ast.walk(ast.parse(source)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            if any(n == "numpy" or n.startswith("numpy.") for n in names):
                found.add(module)
    return sorted(found)


def test_views_import_no_numpy():
    """A view draws numbers it is given: an array to reduce is analysis, done below."""
    views = {
        module_name(p): p.read_text(encoding="utf-8")
        for p in sorted((SRC / "report" / "views").rglob("*.py"))
    }
    assert len(views) > 20
    assert numpy_importers(views) == []


def test_a_planted_numpy_import_in_a_view_is_caught():
    planted = {
        "v.plain": "import numpy as np",
        "v.sub": "import numpy.linalg",
        "v.lazy": "def f():\n    from numpy import percentile",
        "v.typed": "if TYPE_CHECKING:\n    import numpy",
        "v.other": "import numbers\nfrom numpyish import x",
    }
    assert numpy_importers(planted) == ["v.lazy", "v.plain", "v.sub", "v.typed"]


VIEWS_THROUGH_THE_REGISTRY = ("commands", "api", "live")
"""The packages that reach a renderer only through report/renderers.py (its subjects and
progress displays), never a view."""


def views_reached_around_the_registry(graph: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{a} -> {b}"
        for a, targets in graph.items()
        if package(a) in VIEWS_THROUGH_THE_REGISTRY
        for b in targets
        if b.startswith("scalescope.report.views")
    )


def test_commands_api_and_live_reach_views_through_the_registry() -> None:
    assert views_reached_around_the_registry(import_graph()) == []
    planted = {
        "scalescope.live.run_view": {"scalescope.report.views.live"},
        "scalescope.commands.data": {"scalescope.report.renderers"},
        "scalescope.api.launching": {"scalescope.report.views.hang"},
    }
    assert views_reached_around_the_registry(planted) == [
        "scalescope.api.launching -> scalescope.report.views.hang",
        "scalescope.live.run_view -> scalescope.report.views.live",
    ]
