"""The house rule: every import of scalescope points down the layers, to a package its layer
may import, and no modules import each other in a circle; the benchmarks, which drive the
tool as a user would, import anything of it but its command line. Read from the source
(every import statement: inside functions and under ``if TYPE_CHECKING:`` too), so neither a
lazy nor a type-only import can hide an arrow."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[3]
SRC = ROOT / "src" / "scalescope"
BENCHMARKS = ROOT / "benchmarks"

LAYERS = (
    "events",  # the data model: imports nothing of ours
    "probe",  # inside each rank
    "recipes",  # large-batch rules, a public API
    "ingest",  # other tools' traces -> events
    "bench",  # the built-in workloads that run inside a rank, and their models' FLOPs
    "analyze",  # pure functions over the event table
    "launch",  # starts the ranks with the probe, watches them for hangs
    "data",  # the data tools: pack, stage, data bench
    "diagnose",  # rules over the analysis
    "predict",  # fits and projections
    "tune",  # the knob search
    "report",  # renderers: results -> documents, text, pages, JSON, traces
    "live",  # the live watch: polling a run in progress, keys, the live thread, the store view
    "api",  # the public API and the journeys the commands share
    "commands",  # one journey per command: parse nothing, drive the stages, render
    "cli",  # typer declarations: parses, builds a command's options, calls its entry point
)
"""Bottom first: a package may import only itself and packages before it, and of those only
the ones ``ALLOWED`` names."""
RANK = {name: i for i, name in enumerate(LAYERS)}

ALLOWED: dict[str, frozenset[str]] = {
    "events": frozenset(),
    "probe": frozenset({"events"}),
    "recipes": frozenset(),
    "ingest": frozenset({"events"}),
    "bench": frozenset(
        {"events", "probe", "recipes"}
    ),  # probe: comm's unrecorded calls, FSDP knobs
    "analyze": frozenset({"events", "ingest"}),
    "launch": frozenset({"events", "probe", "analyze"}),  # analyze: the hang verdicts
    "data": frozenset({"bench", "launch"}),
    "diagnose": frozenset({"events", "bench", "analyze"}),
    "predict": frozenset({"events", "bench", "analyze", "diagnose"}),
    "tune": frozenset({"events", "probe", "bench", "analyze", "launch", "diagnose"}),
    "report": frozenset(
        {
            "events",
            "probe",
            "ingest",
            "bench",
            "analyze",
            "launch",
            "data",
            "diagnose",
            "predict",
            "tune",
        }  # fmt: skip
    ),
    "live": frozenset({"events", "analyze", "launch", "diagnose", "report"}),
    "api": frozenset(
        {"events", "ingest", "bench", "analyze", "launch", "diagnose", "predict", "report", "live"}
    ),
    "commands": frozenset(
        {
            "events",
            "ingest",
            "bench",
            "analyze",
            "launch",
            "data",
            "diagnose",
            "predict",
            "tune",
            "report",
            "live",
            "api",
        }  # fmt: skip
    ),
    "cli": frozenset({"commands", "bench"}),  # bench: the options of `bench`, BenchOptions
}
"""The packages of ours each package may import (besides itself)."""

BENCHMARKS_ALLOWED = frozenset(LAYERS) - {"cli"}
"""The benchmarks drive the tool through its stages and commands, or start ``scalescope`` as
a process: never through the typer layer."""


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path, modules: set[str]) -> set[str]:
    """The scalescope modules a file imports (a name imported from a package counts as its
    submodule when one of that name exists)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = (
        module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    )
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("scalescope"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            if base.startswith("scalescope"):
                found.update(
                    f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                    for a in node.names
                )
    return {m for m in found if m in modules}


def import_graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in SRC.rglob("*.py")}
    names = set(files)
    return {name: imported(path, names) - {name} for name, path in files.items()}


def package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def not_allowed(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for a, targets in graph.items():
        for b in targets:
            pa, pb = package(a), package(b)
            if pa and pb and pa != pb and pb not in ALLOWED[pa]:
                bad.append(
                    f"{a} -> {b} ({pa} may import {', '.join(sorted(ALLOWED[pa])) or 'nothing'})"
                )
    return sorted(bad)


def benchmark_imports() -> dict[str, set[str]]:
    """The scalescope packages each benchmark file imports (absolute imports: the
    benchmarks are scripts, never part of the package)."""
    found: dict[str, set[str]] = {}
    for path in sorted(BENCHMARKS.rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names.update(
                    f"{node.module}.{a.name}" if node.module == "scalescope" else node.module
                    for a in node.names
                )
        packages = {n.split(".")[1] for n in names if n.startswith("scalescope.")}
        found[str(path.relative_to(ROOT))] = {p for p in packages if (SRC / p).is_dir()}
    return found


def arrows_up(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for a, targets in graph.items():
        for b in targets:
            pa, pb = package(a), package(b)
            if pa and pb and pa != pb and RANK[pb] > RANK[pa]:
                bad.append(f"{a} -> {b} ({pa} is below {pb})")
    return sorted(bad)


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph()


def test_every_package_has_a_layer(graph: dict[str, set[str]]) -> None:
    packages = {package(m) for m in graph} - {""}
    assert packages <= set(LAYERS), f"packages with no layer: {sorted(packages - set(LAYERS))}"


def test_imports_point_down(graph: dict[str, set[str]]) -> None:
    assert arrows_up(graph) == []


def test_no_import_circles(graph: dict[str, set[str]]) -> None:
    assert circles(graph) == []


def test_allowed_lists_point_down() -> None:
    """Each layer's list names only packages below it: the lists refine the order."""
    assert set(ALLOWED) == set(LAYERS)
    up = {(a, b) for a, allowed in ALLOWED.items() for b in allowed if RANK[b] >= RANK[a]}
    assert up == set()


def test_imports_are_allowed(graph: dict[str, set[str]]) -> None:
    assert not_allowed(graph) == []


def test_benchmarks_import_no_command_line() -> None:
    found = benchmark_imports()
    assert found, "no benchmark read"
    bad = {
        path: sorted(p - BENCHMARKS_ALLOWED) for path, p in found.items() if p - BENCHMARKS_ALLOWED
    }
    assert bad == {}


SHARED_COMMANDS = ("scalescope.commands.common", "scalescope.commands.options")
"""What every journey may import of commands/: the consoles and the error (common) and the
options (options/, which the command line reads too)."""


def journeys_importing_journeys(graph: dict[str, set[str]]) -> list[str]:
    """commands/ modules importing another command's journey."""
    journeys = {m for m in graph if package(m) == "commands" and not m.startswith(SHARED_COMMANDS)}
    return sorted(f"{a} -> {b}" for a in journeys for b in graph[a] & journeys)


def test_commands_do_not_import_each_other(graph: dict[str, set[str]]) -> None:
    assert journeys_importing_journeys(graph) == []
    planted = {
        "scalescope.commands.tune": {"scalescope.commands.run"},
        "scalescope.commands.run": set(),
    }
    assert journeys_importing_journeys(planted) == [
        "scalescope.commands.tune -> scalescope.commands.run"
    ]


def test_the_checks_see_a_broken_rule() -> None:
    """The checks themselves: an arrow up and a circle planted in a copy of the graph."""
    planted = {
        "scalescope.events.run": {"scalescope.report.views.run_terminal"},
        "scalescope.report.views.run_terminal": {"scalescope.events.run"},
    }
    assert arrows_up(planted) == [
        "scalescope.events.run -> scalescope.report.views.run_terminal (events is below report)"
    ]
    assert circles(planted) == [["scalescope.events.run", "scalescope.report.views.run_terminal"]]
    assert not_allowed({"scalescope.cli.reports": {"scalescope.report.views.run_terminal"}}) == [
        "scalescope.cli.reports -> scalescope.report.views.run_terminal "
        "(cli may import bench, commands)"
    ]


def report_rooms(graph: dict[str, set[str]]) -> list[str]:
    """Arrows between report/'s rooms that run the wrong way: the core (document, formatting)
    imports no medium and no view, a medium imports no view."""
    core = {"scalescope.report.document", "scalescope.report.formatting"}
    wrong = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            into_views = target.startswith("scalescope.report.views")
            into_media = target.startswith("scalescope.report.media")
            if module in core and (into_views or into_media):
                wrong.append(f"{module} -> {target} (the core draws nothing)")
            elif module.startswith("scalescope.report.media") and into_views:
                wrong.append(f"{module} -> {target} (a medium draws any view)")
    return wrong


MEDIA_VIEWS_PENDING = {"scalescope.report.media.report_json"}
"""Its diagnosis builtins come from a view until the report JSON moves (the api part of #37)."""


def test_report_rooms_run_core_media_views():
    graph = {m: t for m, t in import_graph().items() if m not in MEDIA_VIEWS_PENDING}
    assert report_rooms(graph) == []


def test_report_rooms_catch_a_planted_arrow():
    planted = {
        "scalescope.report.document": {"scalescope.report.media.html"},
        "scalescope.report.media.html": {"scalescope.report.views.run"},
        "scalescope.report.views.run": {"scalescope.report.media.html"},
    }
    assert report_rooms(planted) == [
        "scalescope.report.document -> scalescope.report.media.html (the core draws nothing)",
        "scalescope.report.media.html -> scalescope.report.views.run (a medium draws any view)",
    ]


RESULT_LAYERS = ("analyze", "diagnose", "predict", "tune")
"""The layers whose results report/ draws: it takes their result types (a TuneResult, a
RunAnalysis) and constants, never the functions that make them."""

FUNCTIONS_DRAWN_WITH: dict[str, str] = {
    "scalescope.analyze.steps.gaps.describe": "the words of a gap's place (between X and Y), "
    "shared with the findings",
    "scalescope.diagnose.hang_words.verdict_line": "a hang's words, shared with hang.txt",
    "scalescope.tune.space.format_value": "a knob value's words, as the study's command "
    "lines write it",
}
"""The functions of those layers report/views calls, each with why: words, no analysis."""

GATHERED_BY_SUBJECTS: dict[str, str] = {
    "scalescope.analyze.pipeline_step.pipeline_step": "RunReport.pipeline_step gathers it on "
    "first use until api/reporting.run_report (rewritten for issue 48) passes it",
}
"""What report/subjects.py computes for its views until api/ gathers it (no other module of
report/ calls a function of the result layers)."""


def report_imports() -> set[tuple[str, str, str]]:
    """(report module, source module, name) of each name report/ imports from the result
    layers; name ``*`` for a module imported whole (``import scalescope.analyze.x``, ``from
    scalescope import tune``), whose functions a caller reaches unseen."""
    found = set()
    for path in sorted((SRC / "report").rglob("*.py")):
        me = module_name(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and package(node.module or "") in RESULT_LAYERS:
                found |= {(me, node.module, a.name) for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module == "scalescope":
                found |= {(me, a.name, "*") for a in node.names if a.name in RESULT_LAYERS}
            elif isinstance(node, ast.Import):
                found |= {(me, a.name, "*") for a in node.names if package(a.name) in RESULT_LAYERS}
    return found


def functions_called(imports: set[tuple[str, str, str]]) -> dict[str, set[str]]:
    """Each function (not a type, not a constant) imported, with the report modules that do;
    a module imported whole counts as its functions."""
    out: dict[str, set[str]] = {}
    for importer, source, name in imports:
        if name == "*" or inspect.isfunction(getattr(importlib.import_module(source), name)):
            out.setdefault(f"{source}.{name}", set()).add(importer)
    return out


def not_words(called: dict[str, set[str]]) -> dict[str, list[str]]:
    """The functions report/ runs that are neither words a view quotes nor a subject's
    pending gathering, with who runs them."""
    subjects = {"scalescope.report.subjects"}
    return {
        f: sorted(by)
        for f, by in called.items()
        if not (f in FUNCTIONS_DRAWN_WITH and not by & subjects)
        and not (f in GATHERED_BY_SUBJECTS and by <= subjects)
    }


def test_report_imports_result_types_not_the_functions_that_make_them():
    called = functions_called(report_imports())
    assert not_words(called) == {}, "report/ runs these: move the work below, hand the result"
    listed = set(FUNCTIONS_DRAWN_WITH) | set(GATHERED_BY_SUBJECTS)
    assert listed - set(called) == set(), "no longer used: drop from the list"


def test_a_planted_analysis_call_in_report_is_caught():
    planted = {
        ("scalescope.report.views.run", "scalescope.analyze", "RunAnalysis"),
        ("scalescope.report.views.run", "scalescope.analyze", "analyze_steps"),
        ("scalescope.report.views.env", "scalescope.predict.catalogue", "match_gpu"),
        ("scalescope.report.views.tune", "scalescope.tune.result", "knob_effects"),
        ("scalescope.report.views.tune", "scalescope.tune.space", "format_value"),
        ("scalescope.report.views.pipeline_chart", "scalescope.analyze.pipeline_step",
         "pipeline_step"),
        ("scalescope.report.views.whatif", "scalescope.analyze.model.replay", "*"),
    }  # fmt: skip
    assert not_words(functions_called(planted)) == {
        "scalescope.analyze.analyze_steps": ["scalescope.report.views.run"],
        "scalescope.predict.catalogue.match_gpu": ["scalescope.report.views.env"],
        "scalescope.tune.result.knob_effects": ["scalescope.report.views.tune"],
        "scalescope.analyze.pipeline_step.pipeline_step": [
            "scalescope.report.views.pipeline_chart"
        ],
        "scalescope.analyze.model.replay.*": ["scalescope.report.views.whatif"],
    }


ANALYZE = SRC / "analyze"


def analyze_room(module: str) -> str | None:
    """The room of an analyze module: its sub-package (``ranks``, ``model``, ...), or
    ``analyze`` for a module at the top (summary and cross_rank, which compose the rooms; what
    reads the whole analysis). None outside analyze."""
    parts = module.split(".")
    if parts[:2] != ["scalescope", "analyze"]:
        return None
    if len(parts) > 2 and (ANALYZE / parts[2]).is_dir():
        return parts[2]
    return "analyze"


def analyze_rooms(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The rooms of analyze and the other rooms each one's modules import."""
    rooms: dict[str, set[str]] = {}
    for module, targets in graph.items():
        room = analyze_room(module)
        if room is None:
            continue
        into = {analyze_room(t) for t in targets} - {None, room}
        rooms.setdefault(room, set()).update(into)
        for other in into:
            rooms.setdefault(other, set())
    return rooms


def test_analyze_rooms_import_each_other_in_no_circle(graph: dict[str, set[str]]) -> None:
    rooms = analyze_rooms(graph)
    assert len(rooms) > 2, f"analyze has no rooms: {sorted(rooms)}"
    assert circles(rooms) == []


def test_a_circle_between_analyze_rooms_is_caught() -> None:
    planted = {
        "scalescope.analyze.steps.step_slots": {"scalescope.analyze.ranks.matching"},
        "scalescope.analyze.ranks.matching": {"scalescope.analyze.summary"},
        "scalescope.analyze.summary": {"scalescope.analyze.steps.steps"},
        "scalescope.analyze.steps.steps": set(),
    }
    assert circles(planted) == []
    assert circles(analyze_rooms(planted)) == [["analyze", "ranks", "steps"]]


def test_the_live_channel_stays_in_launchs_layer(graph: dict[str, set[str]]) -> None:
    """The ranks' live states over the job's store and their seals: the hang watch beside the
    launcher reads them, so they stay in launch's layer (live/, above report/, only uses them)."""
    channel = {m for m in graph if m.startswith("scalescope.launch.channel.")}
    assert {"relay", "seals", "store"} <= {m.rpartition(".")[2] for m in channel}
    assert graph["scalescope.launch.watch.sources"] & channel


def rooms(graph: dict[str, set[str]], layer: str) -> dict[str, set[str]]:
    """A layer's rooms (its folders), each with the rooms it imports."""
    prefix = f"scalescope.{layer}."
    room = {m: m.removeprefix(prefix).partition(".")[0] for m in graph if m.startswith(prefix)}
    found: dict[str, set[str]] = {r: set() for r in room.values()}
    for module, r in room.items():
        found[r] |= {room[t] for t in graph[module] if t in room} - {r}
    return found


def test_launchs_rooms_import_each_other_in_no_circle(graph: dict[str, set[str]]) -> None:
    launch = rooms(graph, "launch")
    assert {"channel", "metrics", "options", "process", "run", "watch", "world"} <= set(launch)
    assert circles(launch) == []
    hang, runner = "scalescope.launch.watch.hang", "scalescope.launch.run.runner"
    assert circles(rooms({hang: {runner}, runner: {hang}}, "launch")) == [["run", "watch"]]
