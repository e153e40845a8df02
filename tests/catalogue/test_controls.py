"""Negative controls, claim kinds and seed sweeps: declaring, running, storing, reading and reporting them."""

import dataclasses
import json

import pytest

from catalogue import cli, registry, runner, store
from catalogue.claim import Control
from catalogue.report import kind_counts, render_report
from catalogue.verdicts import across_seeds

CHEAP = "dinh2017.multiple-eigenvalues-inflated"  # < 1 s in quick mode, with a tanh control


@pytest.fixture(scope="module")
def controlled(tmp_path_factory):
    """The cheap claim and its controls, run once in quick mode."""
    out = tmp_path_factory.mktemp("controlled")
    runner.run_jobs(runner.plan_jobs([registry.get(CHEAP)], "quick", 0, controls=True), out)
    return out


def test_apply_updates_nested_specs_and_tuples_of_them():
    claim = registry.get("dinh2017.rescaling-preserves-function")
    spec = Control(name="t", breaks="b", expect="refuted", changes={"scenarios": {"activation": "tanh"}}).apply(
        claim.full
    )
    assert all(s.activation == "tanh" for s in spec.scenarios)
    assert [s.hidden for s in spec.scenarios] == [s.hidden for s in claim.full.scenarios]
    single = registry.get(CHEAP)
    assert single.controls[0].apply(single.quick).scenario.activation == "tanh"
    with pytest.raises(ValueError, match="no field 'activations'"):
        Control(name="t", breaks="b", expect="refuted", changes={"activations": "tanh"}).apply(claim.quick)
    with pytest.raises(ValueError):  # the result is validated: a value the parameters refuse
        Control(name="t", breaks="b", expect="refuted", changes={"tolerance": -1.0}).apply(claim.quick)


def _register(**overrides):
    base = registry.get(CHEAP)
    kwargs = dict(
        id="dinh2017.control-test",
        title="t",
        statement="s.",
        kind="identity",
        source=base.source,
        source_verdict="holds",
        params=base.params,
        quick={},
        full={},
    )
    return registry.register(**{**kwargs, **overrides})(lambda p, ctx: None)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"kind": "theorem"}, "kind must be one of"),
        ({"controls": (Control(name="a", breaks="b", expect="refuted", changes={"nope": 1}),)}, "does not apply"),
        ({"controls": (Control(name="Bad Name", breaks="b", expect="refuted", changes={}),)}, "slugs"),
        ({"controls": 2 * (Control(name="a", breaks="b", expect="refuted", changes={}),)}, "distinct"),
    ],
)
def test_a_bad_kind_or_control_never_registers(overrides, message):
    with pytest.raises(ValueError, match=message):
        _register(**overrides)
    assert "dinh2017.control-test" not in registry._CLAIMS


def test_controls_follow_their_claim_and_skip_the_paper_budget():
    claim = registry.get(CHEAP)
    jobs = runner.plan_jobs([claim], "full", 3, controls=True)
    assert [(j.claim_id, j.control, j.mode, j.seed) for j in jobs] == [
        (CHEAP, None, "full", 3),
        (CHEAP, "tanh", "full", 3),
    ]
    assert json.loads(jobs[1].params_json) == claim.controls[0].apply(claim.full).model_dump(mode="json")
    assert jobs[0].spec_hash != jobs[1].spec_hash
    assert runner.plan_jobs([claim], "full", 3) == jobs[:1]
    with_paper = dataclasses.replace(claim, paper=claim.full)
    assert [j.control for j in runner.plan_jobs([with_paper], "paper", 0, controls=True)] == [None]


def test_control_records_sit_beside_the_claim_and_are_read_apart(controlled):
    assert sorted(p.name for p in controlled.glob("*.json")) == [f"{CHEAP}.json", f"{CHEAP}~tanh.json"]
    scanned = store.scan(controlled)
    assert [c.status for c in scanned.checks] == ["current", "current"]
    assert list(scanned.records) == [CHEAP]
    (own,) = scanned.records.values()
    control = scanned.control_records[(CHEAP, "tanh")]
    assert own.control is None and own.kind == control.kind == "construction"
    assert control.verdict == "refuted" != own.verdict and control.agrees  # agrees: with what it should show
    assert control.expected_failure is None


def test_a_control_record_is_stale_when_its_changes_change(controlled, monkeypatch):
    claim = registry.get(CHEAP)
    moved = dataclasses.replace(claim.controls[0], changes={"scenario": {"activation": "tanh", "n": 17}})
    monkeypatch.setitem(registry._CLAIMS, CHEAP, dataclasses.replace(claim, controls=(moved,)))
    check = store.check_record_file(controlled / f"{CHEAP}~tanh.json")
    assert check.status == "stale" and "spec changed" in check.reason
    assert store.check_record_file(controlled / f"{CHEAP}.json").status == "current"


def test_an_unknown_or_misnamed_control_is_invalid(controlled, tmp_path):
    data = json.loads((controlled / f"{CHEAP}~tanh.json").read_text())
    (tmp_path / f"{CHEAP}~relu.json").write_text(json.dumps({**data, "control": "relu"}))
    check = store.check_record_file(tmp_path / f"{CHEAP}~relu.json")
    assert check.status == "invalid" and "no control 'relu'" in check.reason
    (tmp_path / f"{CHEAP}.json").write_text(json.dumps(data))
    check = store.check_record_file(tmp_path / f"{CHEAP}.json")
    assert check.status == "invalid" and f"{CHEAP}~tanh.json" in check.reason


def test_report_shows_controls_and_agreement_per_kind(controlled, tmp_path):
    scanned = store.scan(controlled)
    text = render_report(scanned.records, tmp_path / "REPORT.md", controls=scanned.control_records)
    assert "(constructions 1/1)" in text
    assert "Negative controls: 1 of 1 claims declare one; for 1 of them" in text
    row = next(line for line in text.splitlines() if line.startswith("| `tanh`"))
    assert "refuted" in row and row.rstrip(" |").endswith("yes")
    without = render_report(scanned.records, tmp_path / "REPORT.md")
    assert "| not run" in without
    assert kind_counts([]) == ""


def test_cli_runs_controls_and_refuses_them_at_the_paper_budget(tmp_path, capsys):
    assert cli.main(["run", CHEAP, "--quick", "--controls", "--out", str(tmp_path), "--no-progress"]) == 0
    out = capsys.readouterr()
    assert "1/1 controls came out as they should" in out.out and f"{CHEAP}~tanh" in out.err
    assert cli.main(["run", "wen2023.sam-bias-fails", "--budget", "paper", "--controls"]) == 2
    assert "--controls" in capsys.readouterr().err
    assert cli.main(["show", CHEAP, "--results", str(tmp_path)]) == 0
    shown = capsys.readouterr().out
    assert "kind: construction" in shown and "control tanh (should be refuted)" in shown


# ----------------------------------------------------------------------------- seeds
FAST_FULL = "lyu2022.effective-lr-identity"  # 0.3 s in full mode


@pytest.mark.parametrize(
    ("verdicts", "expected"),
    [
        (["holds"] * 5, "holds"),
        (["holds"] * 4 + ["inconclusive"], "holds"),
        (["holds"] * 3 + ["inconclusive"] * 2, "inconclusive"),
        (["holds"] * 4 + ["refuted"], "inconclusive"),
        (["refuted"] * 4 + ["inconclusive"], "refuted"),
        (["holds"], "holds"),
        (["holds", "inconclusive"], "inconclusive"),
    ],
)
def test_seeds_pool_into_one_verdict(verdicts, expected):
    assert across_seeds(verdicts) == expected


@pytest.fixture
def three_seed_claim(monkeypatch):
    claim = dataclasses.replace(registry.get(FAST_FULL), seeds=3)
    monkeypatch.setitem(registry._CLAIMS, claim.id, claim)
    return claim


def test_a_full_run_pools_its_seeds_and_a_given_seed_runs_alone(three_seed_claim, tmp_path):
    (job,) = runner.plan_jobs([three_seed_claim], "full", 0)
    assert job.seed == 0 and job.seeds == (1, 2)
    assert runner.plan_jobs([three_seed_claim], "quick", 0)[0].seeds == ()
    assert runner.plan_jobs([three_seed_claim], "full", 7, sweep=False)[0].seeds == ()
    (record,) = runner.run_jobs([job], tmp_path)
    assert [r.seed for r in record.seeds] == [0, 1, 2]
    assert record.verdict == "holds" == across_seeds(r.verdict for r in record.seeds)
    assert set(record.seeds[1].values) == {c.quantity for c in record.checks} == set(three_seed_claim.rule.reads())
    assert record.seeds[0].values != record.seeds[1].values  # different draws
    (alone,) = runner.run_jobs(runner.plan_jobs([three_seed_claim], "full", 0, sweep=False), tmp_path / "one")
    assert alone.seeds == [] and alone.evidence == record.evidence  # seed 0's numbers either way
    assert store.check_record_file(tmp_path / f"{FAST_FULL}.json").status == "current"
    assert runner._is_current(store.check_record_file(tmp_path / f"{FAST_FULL}.json"), job)
    assert not runner._is_current(store.check_record_file(tmp_path / "one" / f"{FAST_FULL}.json"), job)


def test_seeds_that_disagree_are_inconclusive_and_a_failing_seed_is_an_error(three_seed_claim, tmp_path, monkeypatch):
    check = three_seed_claim.check

    def seed_dependent(params, ctx):
        outcome = check(params, ctx)
        return outcome.model_copy(update={"evidence": {**outcome.evidence, "max_rel_err_direction": float(ctx.seed)}})

    monkeypatch.setitem(registry._CLAIMS, FAST_FULL, dataclasses.replace(three_seed_claim, check=seed_dependent))
    (record,) = runner.run_jobs(runner.plan_jobs([registry.get(FAST_FULL)], "full", 0), tmp_path)
    assert [r.verdict for r in record.seeds] == ["holds", "refuted", "refuted"]
    assert record.verdict == "inconclusive"

    def fails_at_seed_2(params, ctx):
        if ctx.seed == 2:
            raise RuntimeError("diverged")
        return check(params, ctx)

    monkeypatch.setitem(registry._CLAIMS, FAST_FULL, dataclasses.replace(three_seed_claim, check=fails_at_seed_2))
    (record,) = runner.run_jobs(runner.plan_jobs([registry.get(FAST_FULL)], "full", 0), tmp_path / "e")
    assert record.verdict == "error" and record.error.startswith("seed 2: RuntimeError: diverged")


def test_report_shows_each_seed(three_seed_claim, tmp_path):
    runner.run_jobs(runner.plan_jobs([three_seed_claim], "full", 0), tmp_path)
    scanned = store.scan(tmp_path)
    text = render_report(scanned.records, tmp_path / "REPORT.md")
    assert "| holds  |       3 |" in text and "*Across 3 seeds* the verdict is **holds**" in text
    assert "| seed | verdict | max_rel_err_direction" in text.replace("   ", " ").replace("  ", " ")
