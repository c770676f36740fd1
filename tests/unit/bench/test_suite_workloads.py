"""The suite's options: workload lists, rank counts and sizes, with one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

import scalescope
from scalescope.bench.suite_workloads import (
    BY_NAME,
    WORKLOADS,
    parse_ranks,
    parse_sizes,
    select_workloads,
)
from scalescope.bench.workload import build_parser as bench_parser


def test_select_keeps_the_suite_order():
    assert [w.name for w in select_workloads("svm, pca")] == ["pca", "svm"]
    assert select_workloads(None) == WORKLOADS


@pytest.mark.parametrize("names", ["pca,cnn", "", ","])
def test_unknown_workloads_are_refused(names):
    with pytest.raises(ValueError, match="unknown workload .*valid: resnet50, lstm"):
        select_workloads(names)


def test_ranks_are_sorted_and_distinct():
    assert parse_ranks("4,1,2,2") == (1, 2, 4)


@pytest.mark.parametrize("text", ["0,2", "a", "", "-1"])
def test_bad_ranks_are_refused(text):
    with pytest.raises(ValueError, match="--ranks takes positive rank counts"):
        parse_ranks(text)


def test_sizes_by_name():
    assert parse_sizes(["pca=100", "lstm=64"]) == {"pca": 100, "lstm": 64}


@pytest.mark.parametrize("item", ["pca", "cnn=3", "pca=0", "pca=x[1]"])
def test_bad_sizes_are_refused(item):
    with pytest.raises(ValueError, match="--size"):
        parse_sizes([item])


def test_every_workload_takes_its_size_flag():
    for workload in WORKLOADS:
        argv = workload.argv(77, quick=True)
        assert f"{workload.size_flag}=77" in argv
        assert argv[0] == workload.args[0]
    args = bench_parser().parse_args(BY_NAME["resnet50"].argv(40, quick=True))
    assert (args.model, args.image_size, args.steps) == ("resnet50", 40, 4)


def test_the_package_never_imports_scikit_learn():
    """scikit-learn is the tests' reference only (the dev extra), never a dependency."""
    src = Path(scalescope.__file__).parent
    users = [p for p in src.rglob("*.py") if "sklearn" in p.read_text()]
    assert users == []
