"""The committed records behind REPORT.md: no number from a diverged run, and no verdict that its
claim's declared rule would not give on the stored evidence.

Wherever a record or a per-model table holds a non-finite loss, the error metrics beside it must be
non-finite too (a NaN prediction is never a correct one), and a diverged model has no finite error.
"""

import csv
import json
import math
from pathlib import Path

import pytest

from catalogue.rules import lookup
from catalogue.verdicts import across_seeds

RECORDS = Path(__file__).resolve().parents[2] / "report" / "records"
TABLES = sorted((RECORDS / "benchmark").glob("*.csv")) if RECORDS.is_dir() else []
FILES = sorted(RECORDS.glob("*.json")) if RECORDS.is_dir() else []


def _number(value) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str) and value.lower() in ("nan", "inf", "-inf"):
        return float(value)
    return None


def _finite_errors_beside_nonfinite_losses(node, where=""):
    """Dicts (anywhere in the evidence) with a non-finite ``*loss*`` and a finite ``*error*``."""
    found = []
    if isinstance(node, dict):
        values = {k: _number(v) for k, v in node.items()}
        bad_loss = [k for k, v in values.items() if "loss" in k and v is not None and not math.isfinite(v)]
        good_error = [
            k for k, v in values.items() if "error" in k and "stderr" not in k and v is not None and math.isfinite(v)
        ]
        if bad_loss and good_error:
            found.append(f"{where}: {bad_loss} beside {good_error}")
        for k, v in node.items():
            found += _finite_errors_beside_nonfinite_losses(v, f"{where}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            found += _finite_errors_beside_nonfinite_losses(v, f"{where}[{i}]")
    return found


@pytest.mark.skipif(not FILES, reason="no committed records")
@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_no_finite_error_next_to_a_nonfinite_loss_in_records(path):
    evidence = json.loads(path.read_text())["evidence"]
    assert _finite_errors_beside_nonfinite_losses(evidence, path.name) == []


@pytest.mark.skipif(not TABLES, reason="no committed per-model tables")
@pytest.mark.parametrize("path", TABLES, ids=[p.name for p in TABLES])
def test_diverged_models_have_no_finite_metric(path):
    rows = list(csv.DictReader(path.open()))
    assert rows
    for row in rows:
        losses = [float(row[k] or "nan") for k in ("train_loss", "test_loss")]
        errors = [float(row[k] or "nan") for k in ("train_error", "test_error", "gap")]
        if row["diverged"] == "True" or not all(math.isfinite(v) for v in losses):
            assert not any(math.isfinite(v) for v in errors), row["spec_hash"]


def test_the_audit_can_fail():
    assert _finite_errors_beside_nonfinite_losses({"sam": {"train_loss_max": "nan", "test_error": 0.0}})
    assert not _finite_errors_beside_nonfinite_losses({"sam": {"train_loss_max": "nan", "test_error": "nan"}})


RULED = [p for p in FILES if json.loads(p.read_text()).get("checks")]


@pytest.mark.skipif(not RULED, reason="no committed record of a claim with a declared rule")
@pytest.mark.parametrize("path", RULED, ids=[p.name for p in RULED])
def test_a_ruled_verdict_follows_from_its_own_evidence(path):
    """Applying the claim's declared rule to the stored evidence gives the stored verdict and checks."""
    from catalogue import registry
    from catalogue.record import Record

    record = Record.model_validate_json(path.read_text())
    claim = registry.get(record.claim_id)
    assert claim.rule is not None, f"{record.claim_id} has checks but declares no rule"
    decision = claim.rule.decide(record.evidence, claim.params.model_validate(record.spec))
    # a pooled record's evidence and checks are its first seed's; its verdict pools every seed's
    assert decision.verdict == (record.seeds[0].verdict if record.seeds else record.verdict)
    assert [c.model_dump(mode="json") for c in decision.checks] == [c.model_dump(mode="json") for c in record.checks]
    if record.seeds:
        assert record.verdict == across_seeds(r.verdict for r in record.seeds)
        assert record.seeds[0].values == {
            path: lookup(record.evidence, path) for path in claim.rule.reads(record.evidence)
        }
        for run in record.seeds:  # each seed's verdict follows from its stored values under the same rule
            assert (
                claim.rule.decide(_nested(run.values), claim.params.model_validate(record.spec)).verdict == run.verdict
            )


def _nested(values: dict) -> dict:
    """``{"a.b": 1}`` → ``{"a": {"b": 1}}``: a seed's checked values as evidence the rule can read."""
    out: dict = {}
    for key, value in values.items():
        *parents, last = key.split(".")
        node = out
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return out


ROOT = RECORDS.parents[1]


@pytest.mark.skipif(not FILES or not (ROOT / "REPORT.md").is_file(), reason="no committed records or report")
def test_report_md_is_what_the_committed_records_give(tmp_path, capsys):
    """`catalogue report --results report/records --readme README.md` rewrites REPORT.md, the CSVs
    of its long tables and README's claims table byte for byte: they hold nothing the committed
    records do not (figures are redrawn into tmp_path)."""
    from catalogue.cli import main

    readme = tmp_path / "README.md"
    readme.write_text((ROOT / "README.md").read_text())
    out = ["--out", str(tmp_path / "REPORT.md"), "--readme", str(readme)]
    assert main(["report", "--results", str(RECORDS), *out]) == 0
    capsys.readouterr()
    assert (tmp_path / "REPORT.md").read_text() == (ROOT / "REPORT.md").read_text()
    assert readme.read_text() == (ROOT / "README.md").read_text(), "README's claims table is not the records'"
    for table in (tmp_path / "report" / "data").glob("*.csv"):  # the long tables REPORT.md links
        assert table.read_text() == (ROOT / "report" / "data" / table.name).read_text(), table.name
    text = (ROOT / "REPORT.md").read_text()
    summary = text[text.index("## Summary") :].split("\n\n")[1].splitlines()
    assert len(summary) > 2 and all(len(row) <= 160 for row in summary), max(summary, key=len)


@pytest.mark.skipif(not FILES, reason="no committed records")
def test_every_full_verdict_has_a_control_that_turns_it():
    """'A verdict must be able to fail', on the records REPORT.md shows: each claim's record has a
    control record with another verdict. An inconclusive claim needs a control that holds or refutes;
    one declared "not holds" that also ends inconclusive shows nothing. The exceptions are the
    registry's control surprises, kept as findings with their measured reasons."""
    from tests.claims.test_registry import CONTROL_SURPRISES

    records = {p.stem: json.loads(p.read_text()) for p in FILES if "@" not in p.stem}
    unturned = sorted(
        claim_id
        for claim_id, record in records.items()
        if "~" not in claim_id
        and not any(r["verdict"] != record["verdict"] for k, r in records.items() if k.startswith(f"{claim_id}~"))
    )
    assert set(unturned) <= set(CONTROL_SURPRISES), f"no control turns the full verdict of {unturned}"
