"""The strict store and ``catalogue verify``: every planted file is named with its reason in
``report``, ``list``, ``show`` and ``verify``, and never replaces or joins the real records."""

import json
import shutil

import pytest

from catalogue import cli, provenance, registry, runner, seeding, store

FAST = ["lyu2022.effective-lr-identity", "lyu2022.scale-invariance-identities"]
MISLABELLED = "dinh2017.rescaling-preserves-function"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    out = tmp_path_factory.mktemp("records")
    runner.run_jobs(runner.plan_jobs([registry.get(i) for i in FAST], "quick", 0), out)
    return out


@pytest.fixture
def records(pristine, tmp_path):
    out = tmp_path / "records"
    shutil.copytree(pristine, out)
    return out


def _data(records, claim_id=FAST[0]):
    return json.loads((records / f"{claim_id}.json").read_text())


def _write(path, data):
    path.write_text(json.dumps(data, indent=2))


def truncated(r):
    text = (r / f"{FAST[1]}.json").read_text()
    (r / f"{FAST[1]}.json").write_text(text[: len(text) // 2])
    return f"{FAST[1]}.json"


def garbage(r):
    (r / "garbage.json").write_bytes(bytes(range(256)) * 3)
    return "garbage.json"


def empty(r):
    (r / "empty.json").write_text("")
    return "empty.json"


def not_a_record(r):
    (r / "other.json").write_text('{"hello": [1, 2]}')
    return "other.json"


def bad_verdict(r):
    data = _data(r)
    data["verdict"] = "bogus"
    _write(r / f"{FAST[0]}.json", data)
    return f"{FAST[0]}.json"


def directory(r):
    (r / "x.json").mkdir()
    return "x.json"


def symlink(r):
    (r / "link.json").symlink_to("/etc/hostname")
    return "link.json"


def unregistered(r):
    data = _data(r)
    data["claim_id"] = "lyu2022.no-such-claim"
    _write(r / "lyu2022.no-such-claim.json", data)
    return "lyu2022.no-such-claim.json"


def mislabelled(r):
    """A lyu2022 record relabelled as a dinh2017 claim with verdict refuted (hashes resealed, as a
    careful forger would)."""
    data = _data(r)
    data.update(claim_id=MISLABELLED, family="dinh2017", verdict="refuted", agrees=True)
    data = store.seal(store.Record.model_validate(data)).model_dump(mode="json")
    _write(r / f"{MISLABELLED}.json", data)
    return f"{MISLABELLED}.json"


def nan_literal(r):
    text = (r / f"{FAST[0]}.json").read_text()
    key = next(iter(_data(r)["evidence"]))
    start = text.index(f'"{key}": ') + len(f'"{key}": ')
    end = min(text.index(",", start), text.index("\n", start))
    (r / f"{FAST[0]}.json").write_text(text[:start] + "NaN" + text[end:])
    return f"{FAST[0]}.json"


def edited(r):
    data = _data(r)
    data["evidence"]["final_norm"] = data["evidence"]["final_norm"] * 1.01
    _write(r / f"{FAST[0]}.json", data)
    return f"{FAST[0]}.json"


def stale(r):
    data = _data(r)
    data["code_files"]["evaluators/objective.py"] = "0" * 64  # written by other code than today's
    data["code_hash"] = provenance.digest(seeding.canonical_json(data["code_files"]))
    _write(r / f"{FAST[0]}.json", data)
    return f"{FAST[0]}.json"


def params_grew(r):
    """A record written before the claim's parameters gained a field (``normalized``, default True)."""
    data = _data(r)
    del data["spec"]["normalized"]
    data["spec_hash"] = seeding.spec_hash({"claim": FAST[0], "params": data["spec"]})
    _write(r / f"{FAST[0]}.json", data)
    return f"{FAST[0]}.json"


CASES = {
    "truncated": (truncated, "invalid", "not valid JSON"),
    "params-grew": (params_grew, "stale", "parameters changed"),
    "garbage": (garbage, "invalid", "not UTF-8"),
    "empty": (empty, "invalid", "empty file"),
    "not-a-record": (not_a_record, "invalid", "not a record"),
    "bad-verdict": (bad_verdict, "invalid", "verdict"),
    "directory": (directory, "invalid", "a directory"),
    "symlink": (symlink, "invalid", "symbolic link"),
    "unregistered": (unregistered, "invalid", "unregistered claim"),
    "mislabelled": (mislabelled, "invalid", "spec is not dinh2017"),
    "nan": (nan_literal, "invalid", "non-finite number NaN"),
    "edited": (edited, "edited", "evidence.final_norm"),
    "stale": (stale, "stale", "evaluators/objective.py"),
}


def run_cli(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_pristine_records_are_current(records):
    checks = store.scan(records).checks
    assert [c.status for c in checks] == ["current", "current"]
    assert set(store.load_records(records)) == set(FAST)


@pytest.mark.parametrize("case", CASES)
def test_each_bad_file_is_classified_with_its_reason(records, case):
    plant, status, reason = CASES[case]
    name = plant(records)
    (check,) = [c for c in store.scan(records).checks if c.path.name == name]
    assert check.status == status and reason in check.reason, check


@pytest.mark.parametrize("case", CASES)
def test_report_list_show_and_verify_name_the_file(records, tmp_path, capsys, case):
    plant, status, reason = CASES[case]
    name = plant(records)
    warning = f"{records / name}: {status}: "
    shown = status == "stale"  # a stale record is still shown (flagged); the others are left out
    out = tmp_path / "REPORT.md"

    code, _, err = run_cli(capsys, "report", "--results", str(records), "--out", str(out))
    assert code == 0 and warning in err and reason in err
    text = out.read_text()
    assert ("**Stale record:**" in text) == shown
    assert MISLABELLED not in text and "no-such-claim" not in text
    assert run_cli(capsys, "report", "--results", str(records), "--out", str(out), "--strict")[0] == 1

    code, listing, err = run_cli(capsys, "list", "--results", str(records))
    assert code == 0 and warning in err
    row = next(line for line in listing.splitlines() if line.startswith(MISLABELLED))
    assert "—" in row  # the dinh2017 claim has no record; the lyu2022 one did not become its record
    assert run_cli(capsys, "list", "--results", str(records), "--strict")[0] == 1

    code, shown_text, err = run_cli(capsys, "show", FAST[0], "--results", str(records))
    assert code == 0 and warning in err

    code, table, _ = run_cli(capsys, "verify", str(records))
    assert code == 1 and name.removesuffix(".json") in table and status in table


def test_registry_fields_are_shown_not_the_files(records, capsys):
    data = _data(records)
    data.update(statement="Something else entirely.", agrees=False)  # not covered by the content hashes
    _write(records / f"{FAST[0]}.json", data)
    record = store.load_records(records)[FAST[0]]
    claim = registry.get(FAST[0])
    assert record.statement == claim.statement and record.agrees == (record.verdict == claim.source_verdict)


def test_verify_passes_on_pristine_records_and_reruns_bitwise(records, capsys):
    code, out, err = run_cli(capsys, "verify", str(records), "--rerun", *FAST)
    assert code == 0, out + err
    assert "2/2 rerun(s) reproduced" in out and "verified" in out


def test_verify_rerun_names_an_edited_number(records, capsys):
    """Edit a number and reseal the hashes, so only the rerun can tell: verify names the number."""
    data = _data(records)
    data["evidence"]["final_norm"] += 1e-9
    record = store.seal(store.Record.model_validate(data))
    _write(records / f"{FAST[0]}.json", record.model_dump(mode="json"))
    code, out, _ = run_cli(capsys, "verify", str(records), "--rerun", FAST[0])
    assert code == 1 and "differs" in out and "evidence.final_norm" in out


def test_verify_rtol_admits_round_off_and_nothing_more(records, capsys):
    """--rtol (for reruns on another CPU vendor) lets a number move by its relative amount only."""
    data = _data(records)
    value = data["evidence"]["final_norm"]
    data["evidence"]["final_norm"] = value * (1 + 1e-13)  # round-off of another kernel path
    _write(records / f"{FAST[0]}.json", store.seal(store.Record.model_validate(data)).model_dump(mode="json"))
    assert run_cli(capsys, "verify", str(records), "--rerun", FAST[0])[0] == 1
    assert run_cli(capsys, "verify", str(records), "--rerun", FAST[0], "--rtol", "1e-9")[0] == 0
    data["evidence"]["final_norm"] = value * (1 + 1e-6)  # a real change
    _write(records / f"{FAST[0]}.json", store.seal(store.Record.model_validate(data)).model_dump(mode="json"))
    code, out, _ = run_cli(capsys, "verify", str(records), "--rerun", FAST[0], "--rtol", "1e-9")
    assert code == 1 and "evidence.final_norm" in out


def test_verify_json_and_allow_stale(records, capsys):
    stale(records)
    code, out, _ = run_cli(capsys, "verify", str(records), "--json")
    report = json.loads(out)
    assert code == 1 and not report["ok"]
    assert {r["status"] for r in report["records"]} == {"current", "stale"}
    assert run_cli(capsys, "verify", str(records), "--allow-stale")[0] == 0


def test_resume_reruns_a_stale_record(records):
    stale(records)
    skipped = []
    again = runner.run_jobs(
        runner.plan_jobs([registry.get(i) for i in FAST], "quick", 0), records, resume=True, on_skip=skipped.append
    )
    assert [r.claim_id for r in again] == [FAST[0]] and [j.claim_id for j in skipped] == [FAST[1]]
    assert store.check_record_file(records / f"{FAST[0]}.json").status == "current"


@pytest.mark.parametrize(
    "argv",
    [
        ["verify", "/no/such/dir"],
        ["verify", "--rerun-sample", "-1"],
        ["verify", "--rerun", "lyu2022.nope"],
        ["verify", "--rtol", "-1"],
    ],
)
def test_verify_bad_input_exits_2(capsys, argv):
    code, _, err = run_cli(capsys, *argv)
    assert code == 2 and len(err.strip().splitlines()) == 1


@pytest.fixture
def claim_with_paper_budget(monkeypatch):
    """FAST[0] with a 'paper' budget (its quick spec with more steps), as a Table 1 claim has."""
    import dataclasses

    base = registry.get(FAST[0])
    claim = dataclasses.replace(base, paper=base.quick.model_copy(update={"steps": base.quick.steps + 5}))
    monkeypatch.setitem(registry._CLAIMS, claim.id, claim)
    return claim


def test_a_paper_record_sits_beside_the_full_one_and_is_reported(records, tmp_path, capsys, claim_with_paper_budget):
    runner.run_jobs(runner.plan_jobs([claim_with_paper_budget], "paper", 0), records)
    assert (records / f"{FAST[0]}@paper.json").exists() and (records / f"{FAST[0]}.json").exists()
    scanned = store.scan(records)
    assert [c.status for c in scanned.checks] == ["current"] * 3
    assert scanned.paper_records[FAST[0]].mode == "paper" and scanned.records[FAST[0]].mode == "quick"
    runner.run_jobs(runner.plan_jobs([claim_with_paper_budget], "quick", 0), records)  # never replaces it
    assert store.scan(records).paper_records[FAST[0]].mode == "paper"
    out = tmp_path / "REPORT.md"
    assert run_cli(capsys, "report", "--results", str(records), "--out", str(out))[0] == 0
    text = out.read_text()
    assert "#### At the paper's budget" in text and "| paper " in text
    code, listing, _ = run_cli(capsys, "list", "--results", str(records))
    assert "(paper)" in listing


def test_a_paper_record_of_a_claim_without_a_paper_budget_is_invalid(records):
    data = _data(records, FAST[1])
    data["mode"] = "paper"
    record = store.seal(store.Record.model_validate(data))
    _write(records / f"{FAST[1]}@paper.json", record.model_dump(mode="json"))
    check = store.check_record_file(records / f"{FAST[1]}@paper.json")
    assert check.status == "invalid" and "has no paper budget" in check.reason
