"""1,000 mutated traces fed to the ingesters and the analysis behind ``scalescope analyze``:
truncated, bit-flipped, wrong types, huge numbers, deep nesting, garbage. Each either
analyses or fails with one ``IngestError`` line; never another exception (a traceback)."""

from __future__ import annotations

import io
import json
import random
from collections import Counter
from pathlib import Path

import pytest
from analysed import analysed  # noqa: E402
from rich.console import Console

from scalescope.diagnose import diagnose_run
from scalescope.ingest import IngestError, ingest
from scalescope.report.views.diagnosis import render_diagnosis
from scalescope.report.views.run_terminal import render_terminal

TRACES = Path(__file__).resolve().parents[4] / "shared" / "traces"
SEEDS = {"kineto": ("hta_cpu_only_gloo_rank-34.json.gz", None),
         "horovod": ("horovod_timeline_cpu_8workers.json", 6000)}  # fmt: skip
"""Seed traces: a Kineto trace and the complete events in the first 6,000 bytes of a
Horovod timeline, closed as a JSON array."""
MUTATIONS = 1000
RENDER_EVERY = 25
"""Every 25th trace that analyses is also rendered (the terminal report and findings)."""

pytestmark = pytest.mark.skipif(
    not TRACES.is_dir(),
    reason=f"real traces not found at {TRACES} (a clone outside the workspace has no ../shared)",
)


def seed_bytes(name: str, cut: int | None) -> bytes:
    import gzip

    data = (TRACES / name).read_bytes()
    data = gzip.decompress(data) if name.endswith(".gz") else data
    if cut is None:
        return data
    data = data[:cut]
    return data[: data.rfind(b"},") + 1] + b"]"


def _nodes(doc, path=()):
    yield path, doc
    children = doc.items() if isinstance(doc, dict) else ()
    children = enumerate(doc) if isinstance(doc, list) else children
    for key, child in children:
        yield from _nodes(child, (*path, key))


def _replace(doc, path, value):
    """``doc`` with the node at ``path`` set to ``value``; unchanged when an earlier
    replacement removed that path."""
    if not path:
        return value
    parent = doc
    try:
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = value
    except (KeyError, IndexError, TypeError):
        pass
    return doc


OTHER_TYPES = ["text", 7, -1, 0.5, None, True, [], {}, [1, "a"], {"x": None}]


class Seed:
    """A seed trace, its bytes and the paths of its JSON nodes (walked once)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.nodes = [(path, type(v)) for path, v in _nodes(json.loads(data))]
        self.numbers = [path for path, t in self.nodes if t in (int, float)]


def mutate(seed: Seed, rng: random.Random) -> tuple[str, bytes]:
    data = seed.data
    kind = rng.choice(["truncate", "bitflip", "types", "huge", "nesting", "garbage"])
    if kind == "truncate":
        return kind, data[: rng.randrange(len(data))]
    if kind == "bitflip":
        out = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(out))
            out[i] ^= 1 << rng.randrange(8)
        return kind, bytes(out)
    if kind == "garbage":
        junk = [b"", b"{", b"[]", b"null", b"\x1f\x8b\x08junk", rng.randbytes(200)]
        return kind, rng.choice(junk)
    doc = json.loads(data)
    if kind == "types":
        for _ in range(rng.randint(1, 5)):
            path, was = rng.choice(seed.nodes)
            doc = _replace(doc, path, rng.choice([v for v in OTHER_TYPES if type(v) is not was]))
        return kind, json.dumps(doc).encode()
    if kind == "huge":
        for path in rng.sample(seed.numbers, min(len(seed.numbers), rng.randint(1, 10))):
            doc = _replace(doc, path, "__HUGE__")
        huge = ["1e999", "-1e999", str(2**64), str(-(2**63) - 1), "1e308", str(10**40)]
        text = json.dumps(doc)
        while '"__HUGE__"' in text:
            text = text.replace('"__HUGE__"', rng.choice(huge), 1)
        return kind, text.encode()
    depth = rng.choice([100, 1000, 100_000])
    doc = _replace(doc, rng.choice(seed.nodes)[0], "__DEEP__")
    nested = "[" * depth + "1" + "]" * depth
    return kind, json.dumps(doc).replace('"__DEEP__"', nested, 1).encode()


def analyse(path: Path, render: bool) -> str:
    """'ok', or the one-line error ``scalescope analyze`` would print."""
    try:
        result = ingest(path)
    except IngestError as exc:
        message = str(exc)
        assert message and "\n" not in message, f"{path.name}: error is not one line: {message!r}"
        return "error"
    analysis = analysed(result.run)
    diagnosis = diagnose_run(result.run, analysis)
    if render:
        console = Console(file=io.StringIO(), width=120)
        render_terminal(analysis, console)
        render_diagnosis(diagnosis, console)
    return "ok"


def test_a_thousand_mutated_traces_give_a_report_or_one_line(tmp_path):
    seeds = {fmt: Seed(seed_bytes(*spec)) for fmt, spec in SEEDS.items()}
    outcomes: Counter = Counter()
    ok_count = 0
    for i in range(MUTATIONS):
        rng = random.Random(i)
        fmt = "kineto" if i % 2 == 0 else "horovod"
        kind, data = mutate(seeds[fmt], rng)
        path = tmp_path / f"{i:04d}-{fmt}-{kind}.json"
        path.write_bytes(data)
        try:
            outcome = analyse(path, render=ok_count % RENDER_EVERY == 0)
        except Exception as exc:  # the defect this test exists to find
            pytest.fail(f"{path.name}: {type(exc).__name__}: {exc}")
        ok_count += outcome == "ok"
        outcomes[kind, outcome] += 1
        path.unlink()
    assert sum(outcomes.values()) == MUTATIONS
    kinds = {k for k, _ in outcomes}
    assert kinds == {"truncate", "bitflip", "types", "huge", "nesting", "garbage"}
    assert outcomes["garbage", "error"] > 0 and ok_count > 0, outcomes
