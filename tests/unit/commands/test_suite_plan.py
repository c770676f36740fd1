"""The suite's plan: sizes, run specs, and what is refused before any rank starts."""

from __future__ import annotations

import os

import pytest

from scalescope.bench.suite_workloads import BY_NAME, select_workloads
from scalescope.commands.suite import (
    SuitePlan,
    check_plan,
    restored_environ,
    run_spec,
)
from scalescope.events.files import SUITE_FILE
from scalescope.launch.placement.plan import MappingOptions


def _plan(tmp_path, **kw) -> SuitePlan:
    values = dict(workloads=select_workloads("pca,svm"), ranks=(1, 2), suite_dir=tmp_path / "s")
    return SuitePlan(**(values | kw))


def test_sizes_quick_default_and_override(tmp_path):
    pca = BY_NAME["pca"]
    assert _plan(tmp_path).size_of(pca) == pca.default_size
    assert _plan(tmp_path, quick=True).size_of(pca) == pca.quick_size
    assert _plan(tmp_path, quick=True, sizes={"pca": 123}).size_of(pca) == 123


def test_run_spec_runs_the_workload_module_with_its_size(tmp_path):
    plan = _plan(tmp_path, quick=True, sizes={"svm": 999})
    spec = run_spec(plan, BY_NAME["svm"], 2)
    assert spec.target == "scalescope.bench.analytics_workload" and spec.is_module
    assert spec.args[:2] == ["svm", "--rows=999"]
    assert spec.launch.nproc_per_node == 2 and spec.run_dir == tmp_path / "s" / "svm-n2"
    assert spec.workload == "svm" and spec.options["size"] == 999


def test_a_used_suite_directory_is_refused(tmp_path):
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / SUITE_FILE).write_text("{}")
    with pytest.raises(ValueError, match="already holds a suite"):
        check_plan(_plan(tmp_path))


def test_a_used_run_directory_is_refused(tmp_path):
    (tmp_path / "s" / "svm-n2").mkdir(parents=True)
    (tmp_path / "s" / "svm-n2" / "run.json").write_text("{}")
    with pytest.raises(ValueError, match="svm-n2 already holds a run"):
        check_plan(_plan(tmp_path))


def test_more_ranks_than_cores_is_refused_up_front(tmp_path):
    too_many = 2 * (os.cpu_count() or 1) + 1
    with pytest.raises(ValueError, match="oversubscribe"):
        check_plan(_plan(tmp_path, ranks=(1, too_many), mapping=MappingOptions(map_by="core")))


def test_environment_changes_of_a_run_do_not_leak(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    with restored_environ():
        os.environ["OMP_NUM_THREADS"] = "2"
    assert "OMP_NUM_THREADS" not in os.environ
