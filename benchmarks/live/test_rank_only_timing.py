"""Two 2-rank runs of tests/e2e/scripts/gpt_train.py that only their timing tells apart from
rank-only work: a rank truly slower at every step (25 ms) is a straggler, not rank-only work;
a rank late by 150 ms every 5 steps is a straggler with its period, not "slower cores".

Moved from tests/e2e/test_rank_only_work.py (issue 37: ~63 s of CPU, and a verdict a busy
2-core machine can blur). What covers them in CI: the recorded straggler runs
(tests/recorded/test_against_truth.py, test_reports_as_recorded.py: a straggler in each phase,
on a shared core), tests/unit/analyze/test_extra_work.py (a rank late every 4 steps comes in
bursts with its period; one slower at every step shifts its median instead), and the live
rank-only runs left in tests/e2e/test_rank_only_work.py (evaluation and checkpoint: never
"slower cores", never STRAGGLER for rank 0's extra work)."""

from __future__ import annotations

import json

from test_rank_only_work import BATCH, CORES_WORDS, GPT, findings, run_and_report


def test_a_truly_slower_rank_is_still_a_straggler(tmp_path) -> None:
    _stdout, doc = run_and_report(
        tmp_path, GPT, "--steps", 24, "--slow-rank", 1, "--slow-ms", 25, "--batch-size", BATCH
    )
    codes = [f["code"] for f in findings(doc)]
    assert "STRAGGLER" in codes and not any(c.startswith("RANK_ONLY") for c in codes), codes
    straggler = findings(doc)[codes.index("STRAGGLER")]
    assert straggler["rank"] == 1 and "only at steps" not in straggler["summary"]


def test_a_rank_late_every_5_steps_gets_its_period_not_slower_cores(tmp_path) -> None:
    _stdout, doc = run_and_report(
        tmp_path, GPT, "--steps", 31, "--slow-rank", 1, "--slow-ms", 150, "--slow-every", 5,
        "--batch-size", BATCH,
    )  # fmt: skip
    late = [f for f in findings(doc) if f["code"] == "STRAGGLER"]
    assert late and late[0]["rank"] == 1, findings(doc)
    assert "late only at steps 5, 10, 15, 20, 25, 30 (every 5 steps)" in late[0]["summary"]
    assert not any(words in json.dumps(late[0]) for words in CORES_WORDS)
