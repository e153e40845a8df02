"""Every registered claim, in quick mode, reaches its source's verdict (a regression test).

A claim that honestly does not reproduce carries ``expected_failure`` with the measured reason
and is marked xfail (strict: if it starts to reproduce, the test says so).
"""

import pytest

from catalogue import registry, runner
from catalogue.claim import FAMILIES

CLAIMS = registry.all_claims()


def _param(claim, mode):
    reason = claim.expected_failure_in(mode)
    marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
    return pytest.param(claim.id, marks=marks, id=claim.id)


@pytest.mark.parametrize("claim_id", [_param(c, "quick") for c in CLAIMS])
def test_quick_verdict_matches_source(claim_id, tmp_path):
    claim = registry.get(claim_id)
    (record,) = runner.run_jobs(runner.plan_jobs([claim], "quick", 0), tmp_path)
    assert record.error is None, record.error
    assert record.verdict == claim.source_verdict, record.evidence


@pytest.mark.full
@pytest.mark.parametrize("claim_id", [_param(c, "full") for c in CLAIMS])
def test_full_verdict_matches_source(claim_id, tmp_path):
    claim = registry.get(claim_id)
    (record,) = runner.run_jobs(runner.plan_jobs([claim], "full", 0), tmp_path)
    assert record.error is None, record.error
    assert record.verdict == claim.source_verdict, record.evidence


def test_registry_is_well_formed():
    assert CLAIMS, "no claims registered"
    for claim in CLAIMS:
        assert claim.family in FAMILIES
        assert claim.statement.endswith(".")
        assert claim.expected_failure_modes and set(claim.expected_failure_modes) <= {"quick", "full", "paper"}
        assert claim.quick != claim.full or claim.family == "benchmark", f"{claim.id}: quick and full are the same"
