"""Diagnose: name what slows a run or an environment, with the evidence and the remedy.

``env_checks`` recognises the known traps of a software build, its threads and its hardware
from the fact dicts of ``scalescope.launch.machine.facts`` (pure functions over data).
``diagnose_run(run, analysis) -> Diagnosis`` names the bottlenecks of a run: findings with
their share of step time, estimated saving, evidence and remedies, best first
(``engine``, ``rules``, thresholds in ``thresholds``; docs/diagnosis.md).
"""

from scalescope.diagnose.engine import diagnose, diagnose_run, diagnosis_input
from scalescope.diagnose.findings import Diagnosis, Evidence, Finding
from scalescope.diagnose.rules_input import DiagnosisInput
from scalescope.diagnose.thresholds import DEFAULT_THRESHOLDS, Thresholds

__all__ = [
    "DEFAULT_THRESHOLDS",
    "Diagnosis",
    "DiagnosisInput",
    "Evidence",
    "Finding",
    "Thresholds",
    "diagnose",
    "diagnose_run",
    "diagnosis_input",
]
