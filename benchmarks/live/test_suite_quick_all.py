"""`scalescope suite --quick` of all six workloads (resnet50, lstm, transformer, pca, kmeans,
svm) in one table: the checks of tests/e2e/test_suite_cli.py, which CI runs on two workloads
live (pca, svm: ~50 s of CPU against ~105 s for six) and on the recorded table of all six
(tests/data/suites/quick). The scikit-learn checks of pca and svm stay in CI; k-means' run here."""

from __future__ import annotations

import pytest
from test_suite_cli import (
    WORKLOADS,
    check_kmeans_is_an_ordinary_profiled_run,
    check_kmeans_matches_scikit_learn,
    check_one_table,
    check_sequence_models_trained,
    check_time_and_throughput,
    run_quick,
)

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    return run_quick(tmp_path_factory.mktemp("suite"), WORKLOADS)


def test_quick_suite_runs_every_workload_in_one_table(quick):
    check_one_table(quick, WORKLOADS)


def test_time_and_throughput_are_the_workloads_own(quick):
    check_time_and_throughput(quick, WORKLOADS)


def test_both_sequence_models_trained_on_a_finite_loss(quick):
    check_sequence_models_trained(quick, WORKLOADS)


def test_kmeans_run_is_an_ordinary_profiled_run(quick):
    check_kmeans_is_an_ordinary_profiled_run(quick)


def test_kmeans_matches_scikit_learn(quick):
    check_kmeans_matches_scikit_learn(quick)
