"""Build: the traps of the software build that ``env_checks`` recognises, as findings.

Only the checks about the build and the backend become findings; the thread checks of
``env_checks`` read the launcher's environment, while the placement rules read what each
rank really got. A build finding has no time estimate: what a missing oneDNN costs shows
only against another build (``scalescope compare``).
"""

from __future__ import annotations

from scalescope.diagnose.env_checks import EnvWarning, check_environment
from scalescope.diagnose.findings import Evidence, Finding, bottleneck
from scalescope.diagnose.rules_input import DiagnosisInput

BUILD_CODES = (
    "NO_ONEDNN",
    "ISA_UNDERUSED",
    "SLOW_BLAS",
    "OPENMP_RUNTIMES",
    "DEFAULT_ALLOCATOR",
    "NO_NCCL",
    "GLOO_ON_GPU",
)
"""env_checks codes that are findings, as ``BUILD_<code>``."""


def _warnings(ctx: DiagnosisInput) -> list[EnvWarning]:
    meta = ctx.meta
    backend = meta.options.get("backend")
    return check_environment(
        meta.software,
        meta.hardware,
        meta.threads,
        backend=backend if isinstance(backend, str) else None,
    )


class BuildRule:
    """One ``env_checks`` code as a build finding."""

    name = "build"

    def __init__(self, code: str) -> None:
        if code not in BUILD_CODES:
            raise ValueError(f"{code!r} is not one of {BUILD_CODES}")
        self.code = code

    def not_judged(self, ctx: DiagnosisInput) -> tuple[str, ...]:
        if not ctx.meta.software or not ctx.meta.hardware:
            return (f"{self.name}: the software and hardware facts were not recorded",)
        return ()

    def evaluate(self, ctx: DiagnosisInput) -> Finding | None:
        if not ctx.meta.software:
            return None
        found = next((w for w in _warnings(ctx) if w.code == self.code), None)
        if found is None:
            return None
        code = f"BUILD_{self.code}"
        return Finding(
            code=code,
            bottleneck=bottleneck(code),
            summary=found.message,
            share_pct=None,
            saved_ms_per_step=None,
            evidence=(Evidence("facts", found.evidence),),
            remedies=(found.remedy,),
        )


BUILD_RULES = tuple(BuildRule(code) for code in BUILD_CODES)
