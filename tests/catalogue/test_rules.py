"""Declared verdict rules: every outcome of every rule, NaN and missing values, composition, and
the runner applying a claim's rule (its checks in the record, a broken rule as an error record)."""

import dataclasses
import math

import pytest
from pydantic import BaseModel

from catalogue import registry, runner
from catalogue.claim import Outcome
from catalogue.rules import (
    AllOf,
    AtLeast,
    AtMost,
    Between,
    Counterexample,
    Each,
    Given,
    IntervalAbove,
    IntervalBelow,
    IsTrue,
    Near,
    Supports,
    lookup,
    measured,
    param,
)

WHY = "a stated reason"


class P(BaseModel):
    tolerance: float = 1e-8
    band: tuple[float, float] = (0.5, 2.0)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0.0, "holds"),
        (1e-8, "holds"),
        (1e-7, "inconclusive"),
        (1e-6, "inconclusive"),
        (2e-6, "refuted"),
        (math.nan, "inconclusive"),
        (math.inf, "inconclusive"),
        ("nan", "inconclusive"),
        (None, "inconclusive"),
    ],
)
def test_at_most_with_a_gap(value, expected):
    rule = AtMost("err", param("tolerance"), 1e-6, why=WHY)
    decision = rule.decide({"err": value}, P())
    assert decision.verdict == expected
    (check,) = decision.checks
    assert check.threshold == {"holds": 1e-8, "refuted": 1e-6} and check.why == WHY
    assert check.rule == "err ≤ tolerance (1e-08) (refuted above 1e-06)"


@pytest.mark.parametrize(("value", "expected"), [(3, "holds"), (2, "holds"), (1.999, "refuted")])
def test_at_least_without_a_gap(value, expected):
    assert AtLeast("count", 2, why=WHY).decide({"count": value}).verdict == expected


@pytest.mark.parametrize(("value", "expected"), [(150, "holds"), (50, "inconclusive"), (5, "refuted")])
def test_at_least_with_a_gap(value, expected):
    assert AtLeast("ratio", 100, refuted=10, why=WHY).decide({"ratio": value}).verdict == expected


@pytest.mark.parametrize(("value", "expected"), [(1.0, "holds"), (0.0, "refuted"), (-1.0, "refuted")])
def test_strict_comparison(value, expected):
    rule = AtLeast("infimum", 0, why=WHY, strict=True)
    assert rule.decide({"infimum": value}).verdict == expected
    assert rule.describe() == "infimum > 0"
    assert AtMost("x", 0, why=WHY, strict=True).decide({"x": 0.0}).verdict == "refuted"


def test_threshold_from_another_measured_quantity():
    rule = AtLeast("final_count", measured("rank_bound"), why=WHY)
    assert rule.decide({"final_count": 5, "rank_bound": 5}).verdict == "holds"
    assert rule.decide({"final_count": 4, "rank_bound": 5}).verdict == "refuted"


@pytest.mark.parametrize(
    ("value", "expected"), [(2.05, "holds"), (1.95, "holds"), (2.2, "refuted"), (None, "inconclusive")]
)
def test_near(value, expected):
    assert Near("slope", 2, 0.1, why=WHY).decide({"slope": value}).verdict == expected


@pytest.mark.parametrize(("value", "expected"), [(0.5, "holds"), (2.0, "holds"), (0.49, "refuted"), (2.5, "refuted")])
def test_between_reads_a_band_from_params(value, expected):
    rule = Between("ratio", param("band.0"), param("band.1"), why=WHY)
    assert rule.decide({"ratio": value}, P()).verdict == expected


@pytest.mark.parametrize(
    ("value", "expected"), [(True, "holds"), (False, "refuted"), (1, "inconclusive"), ("yes", "inconclusive")]
)
def test_is_true_only_for_booleans(value, expected):
    assert IsTrue("monotone", why=WHY).decide({"monotone": value}).verdict == expected


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (0, 0, "holds"),
        (0, 1e-7, "inconclusive"),
        (0, 1, "refuted"),
        (math.nan, 1, "refuted"),
        (math.nan, 0, "inconclusive"),
    ],
)
def test_all_of_refutes_on_any_refuted_part(a, b, expected):
    rule = AllOf(AtMost("a", 1e-8, 1e-6, why=WHY), AtMost("b", 1e-8, 1e-6, why=WHY))
    decision = rule.decide({"a": a, "b": b})
    assert decision.verdict == expected
    assert [c.quantity for c in decision.checks] == ["a", "b"]


@pytest.mark.parametrize(
    ("converged", "slope", "expected"),
    [(True, 2.0, "holds"), (True, 3.0, "refuted"), (False, 2.0, "inconclusive"), (False, 3.0, "inconclusive")],
)
def test_given_decides_nothing_when_its_precondition_fails(converged, slope, expected):
    rule = Given(IsTrue("converged", why=WHY), Near("slope", 2, 0.1, why=WHY))
    decision = rule.decide({"converged": converged, "slope": slope})
    assert decision.verdict == expected
    assert [c.role for c in decision.checks] == ["requires", "test"]
    assert rule.describe() == "given converged is true: |slope − 2| ≤ 0.1"
    assert Near("slope", -2, 0.1, why=WHY).describe() == "|slope + 2| ≤ 0.1"


@pytest.mark.parametrize(
    ("flattest", "error", "expected"),
    [(True, 0.9, "refuted"), (True, 0.1, "inconclusive"), (False, 0.9, "inconclusive"), (None, 0.9, "inconclusive")],
)
def test_a_counterexample_refutes_and_its_absence_proves_nothing(flattest, error, expected):
    rule = Counterexample(AllOf(IsTrue("flattest", why=WHY), AtLeast("error", 0.5, why=WHY)), why=WHY)
    decision = rule.decide({"flattest": flattest, "error": error})
    assert decision.verdict == expected
    assert [c.role for c in decision.checks] == ["witness", "witness"]
    assert rule.describe() == "refuted by a counterexample: flattest is true and error ≥ 0.5"
    with pytest.raises(ValueError, match="why"):
        Counterexample(IsTrue("flattest", why=WHY), why="")


@pytest.mark.parametrize(
    ("ci", "strict", "expected"),
    [
        ([0.5, 0.7], False, "holds"),
        ([0.45, 0.7], False, "holds"),
        ([0.45, 0.7], True, "inconclusive"),
        ([0.4, 0.7], False, "inconclusive"),
        ([0.3, 0.44], False, "refuted"),
        ([0.3, 0.45], True, "inconclusive"),
        ([math.nan, 0.7], False, "inconclusive"),
        ([0.7, 0.5], False, "inconclusive"),  # not an interval
        (0.5, False, "inconclusive"),
    ],
)
def test_interval_above_decides_only_when_the_whole_interval_is_on_one_side(ci, strict, expected):
    rule = IntervalAbove("slope_ci", measured("cut"), why=WHY, strict=strict)
    decision = rule.decide({"slope_ci": ci, "cut": 0.45})
    assert decision.verdict == expected
    assert decision.checks[0].threshold == 0.45


@pytest.mark.parametrize(
    ("ci", "expected"),
    [([-0.5, -0.1], "holds"), ([-0.5, 0.0], "inconclusive"), ([-0.1, 0.2], "inconclusive"), ([0.1, 0.2], "refuted")],
)
def test_interval_below_is_the_mirror(ci, expected):
    rule = IntervalBelow("slope_ci", 0, why=WHY, strict=True)
    assert rule.decide({"slope_ci": ci}).verdict == expected
    assert rule.describe() == "slope_ci wholly < 0 (refuted wholly above)"


def test_each_applies_its_rule_to_every_entry_and_names_the_checks():
    rule = Each("by_power", IntervalAbove("ci", measured("cut"), why=WHY))
    evidence = {"by_power": {"c1": {"ci": [0.5, 0.6], "cut": 0.45}, "c2": {"ci": [0.5, 0.7], "cut": 0.6}}}
    decision = rule.decide(evidence)
    assert decision.verdict == "inconclusive"
    assert [c.quantity for c in decision.checks] == ["by_power.c1.ci", "by_power.c2.ci"]
    assert decision.checks[1].rule.startswith("by_power.c2.ci wholly ≥ cut (0.6)")
    assert rule.reads(evidence) == ["by_power.c1.ci", "by_power.c1.cut", "by_power.c2.ci", "by_power.c2.cut"]
    assert rule.reads() == ["by_power"]
    evidence["by_power"]["c2"]["ci"] = [0.1, 0.2]
    assert rule.decide(evidence).verdict == "refuted"
    evidence["by_power"]["c2"]["ci"] = [0.7, 0.8]
    assert rule.decide(evidence).verdict == "holds"


def test_each_on_nothing_decides_nothing_and_on_a_non_mapping_is_a_bug():
    rule = Each("populations", AtLeast("tau", 0, why=WHY))
    assert rule.decide({"populations": {}}).verdict == "inconclusive"
    with pytest.raises(ValueError, match="mapping"):
        rule.decide({"populations": [1, 2]})


@pytest.mark.parametrize(("tau", "expected"), [(0.1, "holds"), (0.5, "inconclusive"), (math.nan, "inconclusive")])
def test_a_supporting_part_never_refutes(tau, expected):
    decision = Supports(AtMost("abs_tau", 0.3, why=WHY, strict=True)).decide({"abs_tau": tau})
    assert decision.verdict == expected
    assert decision.checks[0].verdict == expected


def test_a_rule_names_every_evidence_path_it_reads():
    rule = Given(
        IsTrue("converged", why=WHY),
        AllOf(AtMost("a", measured("b"), why=WHY), Near("c", measured("d"), param("tol"), why=WHY)),
    )
    assert rule.reads() == ["converged", "a", "b", "c", "d"]
    assert Counterexample(Between("x", 0, measured("y"), why=WHY), why=WHY).reads() == ["x", "y"]


def test_nested_paths():
    assert lookup({"a": {"b": [1, 2, 3]}}, "a.b.-1") == 3
    assert lookup(P(), "band.1") == 2.0
    with pytest.raises(KeyError, match="'c' is not in"):
        lookup({"a": {"b": 1}}, "a.c")


def test_a_threshold_needs_its_why():
    for make in (
        lambda: AtMost("x", 1, why=""),
        lambda: AtLeast("x", 1, why=" "),
        lambda: Near("x", 1, 1, why=""),
        lambda: Between("x", 0, 1, why=""),
        lambda: IsTrue("x", why=""),
        lambda: IntervalAbove("x", 0, why=""),
        lambda: IntervalBelow("x", 0, why=""),
    ):
        with pytest.raises(ValueError, match="needs its why"):
            make()


def test_a_non_numeric_threshold_is_a_bug_not_a_verdict():
    with pytest.raises(ValueError, match="not a finite number"):
        AtMost("x", measured("label"), why=WHY).decide({"x": 1.0, "label": "abc"})


# --------------------------------------------------------------------------- through the runner
BASE = "lyu2022.effective-lr-identity"


def _with_rule(monkeypatch, rule, evidence=None, verdict=None):
    base = registry.get(BASE)

    def check(params, ctx):
        return Outcome(verdict=verdict, evidence=evidence or {"err": 1e-12, "flag": True})

    claim = dataclasses.replace(base, id="lyu2022.ruled", check=check, rule=rule)
    monkeypatch.setitem(registry._CLAIMS, claim.id, claim)
    return claim


def _run(claim, tmp_path):
    return runner.run_jobs(runner.plan_jobs([claim], "quick", 0), tmp_path)[0]


def test_runner_applies_the_declared_rule(monkeypatch, tmp_path):
    claim = _with_rule(monkeypatch, AllOf(AtMost("err", 1e-10, why=WHY), IsTrue("flag", why=WHY)))
    record = _run(claim, tmp_path)
    assert record.verdict == "holds" and record.agrees
    assert [(c.quantity, c.verdict) for c in record.checks] == [("err", "holds"), ("flag", "holds")]
    assert "checks" in record.content()


def test_runner_records_a_refutation_with_its_checks(monkeypatch, tmp_path):
    claim = _with_rule(monkeypatch, AtMost("err", 1e-14, why=WHY))
    record = _run(claim, tmp_path)
    assert record.verdict == "refuted" and record.checks[0].value == 1e-12


def test_rule_naming_an_unmeasured_quantity_is_an_error_record(monkeypatch, tmp_path):
    claim = _with_rule(monkeypatch, AtMost("missing", 1, why=WHY))
    record = _run(claim, tmp_path)
    assert record.verdict == "error" and "verdict rule" in record.error and "'missing'" in record.error


def test_a_rule_and_a_verdict_together_are_an_error(monkeypatch, tmp_path):
    claim = _with_rule(monkeypatch, AtMost("err", 1, why=WHY), verdict="holds")
    assert _run(claim, tmp_path).verdict == "error"


def test_a_claim_without_a_rule_keeps_its_old_record_shape(monkeypatch, tmp_path):
    record = _run(_with_rule(monkeypatch, None, verdict="holds"), tmp_path)
    assert record.verdict == "holds" and record.checks == [] and "checks" not in record.content()


def test_a_claim_with_neither_rule_nor_verdict_is_an_error(monkeypatch, tmp_path):
    assert _run(_with_rule(monkeypatch, None), tmp_path).verdict == "error"
