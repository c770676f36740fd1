"""The diagnosis rules: one small class per bottleneck.

A rule has a ``name``, ``not_judged(ctx)`` (what it could not judge and why: inputs never
measured) and ``evaluate(ctx) -> Finding | None``. It abstains (None) when its inputs are
missing, and returns None too when they are measured and no threshold is crossed. Rules
read only ``DiagnosisInput`` and ``Thresholds``; their words come from ``findings``.
"""

from __future__ import annotations

from typing import Protocol

from scalescope.diagnose.findings import Finding
from scalescope.diagnose.rules_build import BUILD_RULES
from scalescope.diagnose.rules_comm import CommBandwidthRule, CommLatencyRule
from scalescope.diagnose.rules_compute import ComputeRule, MemoryRule
from scalescope.diagnose.rules_copies import PageableCopyRule
from scalescope.diagnose.rules_extra_work import RANK_ONLY_RULES
from scalescope.diagnose.rules_fsdp import FSDP_RULES
from scalescope.diagnose.rules_input import DiagnosisInput
from scalescope.diagnose.rules_job import HangRule, PauseRule, ReplicasRule, TimelineRule
from scalescope.diagnose.rules_links import SlowLinkRule
from scalescope.diagnose.rules_pipeline import InputRule
from scalescope.diagnose.rules_placement import (
    IdleCoresRule,
    NumaSpanRule,
    OversubscribedRule,
    UnboundRule,
)
from scalescope.diagnose.rules_ranks import ImbalanceRule, NodeStragglerRule, StragglerRule
from scalescope.diagnose.rules_stages import STAGE_RULES
from scalescope.diagnose.rules_tp import TP_RULES
from scalescope.diagnose.rules_zero import ZERO_RULES


class Rule(Protocol):
    name: str

    def not_judged(self, ctx: DiagnosisInput) -> tuple[str, ...]: ...

    def evaluate(self, ctx: DiagnosisInput) -> Finding | None: ...


RULES: tuple[Rule, ...] = (
    TimelineRule(),
    HangRule(),
    ReplicasRule(),
    PauseRule(),
    InputRule(),
    PageableCopyRule(),
    CommLatencyRule(),
    CommBandwidthRule(),
    *FSDP_RULES,
    *TP_RULES,
    *ZERO_RULES,
    *RANK_ONLY_RULES,
    *STAGE_RULES,
    NodeStragglerRule(),
    StragglerRule(),
    SlowLinkRule(),
    ImbalanceRule(),
    ComputeRule(),
    MemoryRule(),
    OversubscribedRule(),
    UnboundRule(),
    IdleCoresRule(),
    NumaSpanRule(),
    *BUILD_RULES,
)


def evaluate_rules(
    ctx: DiagnosisInput, rules: tuple[Rule, ...] = RULES
) -> tuple[list[Finding], list[str]]:
    """Every finding of ``rules`` and every reason they gave for not judging (deduplicated)."""
    findings: list[Finding] = []
    reasons: list[str] = []
    for rule in rules:
        for reason in rule.not_judged(ctx):
            if reason not in reasons:
                reasons.append(reason)
        finding = rule.evaluate(ctx)
        if finding is not None:
            findings.append(finding)
    return findings, reasons
