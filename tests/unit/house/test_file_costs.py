"""The order make test hands files to its workers: dearest first, by a JUnit report's
seconds per file; a new file by a guess."""

from __future__ import annotations

import file_costs


def test_a_junit_report_gives_seconds_per_file_dearest_first(tmp_path):
    report = tmp_path / "junit.xml"
    report.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.e2e.test_whatif_cli" name="a" time="1.25"/>'
        '<testcase classname="tests.e2e.test_whatif_cli" name="b" time="2.0"/>'
        '<testcase classname="tests.conftest_missing.Case" name="c" time="0.5"/>'
        '<testcase classname="tests.unit.house.test_file_costs.TestLike" name="d" time="9"/>'
        "</testsuite></testsuites>"
    )
    costs = file_costs.from_junit(report)
    assert list(costs.items()) == [
        ("tests/unit/house/test_file_costs.py", 9.0),
        ("tests/e2e/test_whatif_cli.py", 3.2),
        ("tests/conftest_missing/Case.py", 0.5),
    ]


def test_a_file_not_listed_counts_as_a_guess_by_whether_it_starts_processes():
    costs = {"tests/e2e/test_x.py": 50.0}
    assert file_costs.cost(costs, "tests/e2e/test_x.py", live=True) == 50.0
    assert file_costs.cost(costs, "tests/e2e/test_new.py", live=True) == file_costs.NEW_LIVE_S
    assert file_costs.cost(costs, "tests/unit/test_new.py", live=False) == file_costs.NEW_S


def test_the_recorded_costs_name_files_that_exist():
    missing = [name for name in file_costs.load() if not (file_costs.ROOT / name).exists()]
    assert not missing, f"tests/data/file_costs.json names removed files: {missing}"
