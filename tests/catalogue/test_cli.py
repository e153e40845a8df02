"""The command line: verbs, exit codes, and one-line errors for bad input."""

import dataclasses
import json
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from catalogue import cli, registry

CLAIM = "lyu2022.effective-lr-identity"


def run_cli(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_list_shows_every_claim(capsys):
    code, out, _ = run_cli(capsys, "list")
    assert code == 0
    for claim in registry.all_claims():
        assert claim.id in out


def test_run_show_and_report(capsys, tmp_path):
    code, out, err = run_cli(capsys, "run", CLAIM, "--quick", "--out", str(tmp_path / "r"), "--no-progress")
    assert code == 0, err
    assert (tmp_path / "r" / f"{CLAIM}.json").exists()
    code, out, _ = run_cli(capsys, "show", CLAIM, "--results", str(tmp_path / "r"))
    assert code == 0 and "max_rel_err_direction" in out and "last run: holds" in out
    code, out, _ = run_cli(capsys, "report", "--results", str(tmp_path / "r"), "--out", str(tmp_path / "REPORT.md"))
    assert code == 0
    assert "## Summary" in (tmp_path / "REPORT.md").read_text()


def test_spec_file_runs_custom_params(capsys, tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text(f'claim = "{CLAIM}"\nseed = 4\n[params]\nsteps = 7\n[params.scenario]\nn = 6\nd = 9\n')
    code, _, err = run_cli(capsys, "run", "--spec", str(spec), "--out", str(tmp_path), "--no-progress")
    assert code == 0, err
    record = json.loads((tmp_path / f"{CLAIM}.json").read_text())
    assert record["mode"] == "custom" and record["seed"] == 4
    assert record["evidence"]["steps_checked"] == 7 and record["spec"]["scenario"]["d"] == 9


def _assert_one_line_error(code, err, must_name):
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("catalogue: error:")
    assert must_name in lines[0]
    assert "Traceback" not in err


def test_unknown_claim_suggests_close_matches(capsys):
    code, _, err = run_cli(capsys, "run", "lyu2022.efective-lr-identity")
    _assert_one_line_error(code, err, "did you mean lyu2022.effective-lr-identity")


@pytest.mark.parametrize(
    "argv, named",
    [
        (["run"], "exactly one of"),
        (["run", "--all", "--family", "lyu2022"], "exactly one of"),
        (["run", "--family", "nope"], "--family"),
        (["run", "--all", "--jobs", "0"], "--jobs"),
        (["run", "--all", "--scheduler", "tcp://x:1"], "--scheduler"),
        (["show", "nope.claim"], "unknown claim id"),
        (["report", "--results", "/nonexistent/dir"], "--results"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_arguments_exit_2(capsys, argv, named):
    code, _, err = run_cli(capsys, *argv)
    _assert_one_line_error(code, err, named)


def _rejected_lr(value) -> bool:
    """True if the claim's params refuse ``lr = value`` (pydantic reads "1" as 1.0: not a bad input)."""
    try:
        registry.get(CLAIM).params.model_validate({"lr": value})
    except ValidationError:
        return True
    return False


bad_params = st.one_of(
    st.builds(
        lambda v: ({"lr": v}, "params.lr"),
        st.floats(max_value=0) | st.just(float("nan")) | st.text(max_size=3).filter(_rejected_lr),
    ),
    st.builds(lambda v: ({"steps": v}, "params.steps"), st.integers(max_value=0)),
    st.builds(lambda v: ({"scenario": {"n": v}}, "params.scenario.n"), st.integers(max_value=0)),
    st.builds(
        lambda v: ({"scenario": {"noise": v}}, "params.scenario.noise"),
        st.floats(max_value=-1e-9) | st.just(float("inf")),
    ),
    st.builds(
        lambda v: ({"scenario": {"inputs": v}}, "params.scenario.inputs"),
        st.text(max_size=5).filter(lambda s: s not in ("isotropic", "anisotropic")),
    ),
    st.builds(lambda k: ({k: 1}, f"params.{k}"), st.sampled_from(["learning_rate", "stepz", "Lr"])),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=bad_params)
def test_invalid_spec_files_exit_2_naming_the_field(tmp_path, capsys, case):
    params, field = case
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"claim": CLAIM, "params": params}, allow_nan=True))
    code, _, err = run_cli(capsys, "run", "--spec", str(path))
    _assert_one_line_error(code, err, field)


@pytest.mark.parametrize(
    "content, named",
    [
        ("{not json", "not valid json"),
        ('{"params": {}}', "claim: Field required"),
        ('{"claim": "lyu2022.nope"}', "claim: unknown claim id"),
        (
            '{"claim": "lyu2022.effective-lr-identity", "extra": 1}',
            "extra: Extra inputs are not permitted",
        ),
    ],
)
def test_malformed_spec_files(tmp_path, capsys, content, named):
    path = tmp_path / "bad.json"
    path.write_text(content)
    code, _, err = run_cli(capsys, "run", "--spec", str(path))
    _assert_one_line_error(code, err, named)


def test_schema_lists_every_claim(capsys):
    code, out, _ = run_cli(capsys, "schema")
    schema = json.loads(out)
    assert code == 0
    tags = {
        alt["properties"]["claim"]["const"] for alt in schema["$defs"].values() if "claim" in alt.get("properties", {})
    }
    assert tags == {c.id for c in registry.all_claims()}


def test_console_entry_point_exit_code():
    proc = subprocess.run(
        [sys.executable, "-m", "catalogue.cli", "run", "no.such-claim"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_more_bad_input_is_one_line(capsys, tmp_path):
    spec = tmp_path / "latin1.json"
    spec.write_bytes(b'{"claim": "caf\xe9"}')
    code, _, err = run_cli(capsys, "run", "--spec", str(spec))
    _assert_one_line_error(code, err, "not UTF-8")
    a_file = tmp_path / "file"
    a_file.write_text("x")
    code, _, err = run_cli(capsys, "run", CLAIM, "--quick", "--out", str(a_file))
    _assert_one_line_error(code, err, "--out")
    code, _, err = run_cli(capsys, "run", "--all", "--spec", str(spec))
    _assert_one_line_error(code, err, "exactly one of")
    good = tmp_path / "empty.json"
    good.write_text(json.dumps({"claim": "dinh2017.hessian-block-law", "params": {"scenarios": []}}))
    code, _, err = run_cli(capsys, "run", "--spec", str(good))
    _assert_one_line_error(code, err, "params.scenarios")


def test_report_out_must_be_a_file(capsys, tmp_path):
    run_cli(capsys, "run", CLAIM, "--quick", "--out", str(tmp_path / "r"), "--no-progress")
    code, _, err = run_cli(capsys, "report", "--results", str(tmp_path / "r"), "--out", str(tmp_path))
    _assert_one_line_error(code, err, "is a directory")


def test_paper_budget_plans_the_sources_schedule_and_refuses_claims_without_one(capsys):
    from catalogue.runner import plan_jobs

    claim = registry.get("wen2023.sam-simln-generalizes")
    (job,) = plan_jobs([claim], "paper", 0)
    params = json.loads(job.params_json)
    assert job.mode == "paper" and params["train"]["sam_epochs"] == 100_000 and params["train"]["width"] == 500
    (job,) = plan_jobs([registry.get(CLAIM)], "paper", 0)  # no paper budget: its full mode is the source's
    assert job.mode == "full"
    code, _, err = run_cli(capsys, "run", CLAIM, "--budget", "paper")
    _assert_one_line_error(code, err, "has no paper budget")
    code, _, err = run_cli(capsys, "run", CLAIM, "--budget", "paper", "--quick")
    assert code == 2


DEEP_PARAMS = json.dumps({"claim": CLAIM, "params": {"scenario": "X"}}).replace('"X"', "[" * 200_000)


@pytest.mark.parametrize(
    ("name", "content", "named"),
    [
        ("deep.json", "[" * 200_000, "not valid json"),
        ("deep.toml", "x = " + "[" * 5_000, "not valid toml"),
        ("deep-params.json", DEEP_PARAMS, "not valid"),
    ],
)
def test_deeply_nested_spec_files_are_one_line_errors(tmp_path, capsys, name, content, named):
    path = tmp_path / name
    path.write_text(content)
    code, _, err = run_cli(capsys, "run", "--spec", str(path), "--out", str(tmp_path / "r"))
    _assert_one_line_error(code, err, named)


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        ({"claim": CLAIM, "params": {"steps": "3"}}, "params.steps"),
        ({"claim": CLAIM, "params": {"normalized": "yes"}}, "params.normalized"),
        ({"claim": CLAIM, "params": {"steps": True}}, "params.steps"),
        ({"claim": CLAIM, "seed": "1"}, "seed"),
        ({"claim": CLAIM, "params": {"scenario": {"n": 3.0}}}, "params.scenario.n"),
    ],
)
def test_spec_files_are_read_with_strict_types(tmp_path, capsys, spec, named):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    code, _, err = run_cli(capsys, "run", "--spec", str(path), "--out", str(tmp_path / "r"))
    _assert_one_line_error(code, err, named)
    good = tmp_path / "good.toml"  # arrays still read as tuples, integers as floats
    good.write_text(f'claim = "{CLAIM}"\n[params]\nlr = 1\nsteps = 2\n[params.scenario]\nn = 6\nd = 8\n')
    code, _, err = run_cli(capsys, "run", "--spec", str(good), "--out", str(tmp_path / "r"), "--no-progress")
    assert code == 0, err


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(document=json_values | st.builds(lambda p: {"claim": CLAIM, "params": p}, json_values))
def test_fuzzed_spec_files_exit_2_with_one_line(tmp_path, capsys, document):
    if isinstance(document, dict) and document.get("params") in ({}, None) and document.get("claim") == CLAIM:
        return  # a valid spec (the claim with its defaults) would run
    path = tmp_path / "fuzz.json"
    path.write_text(json.dumps(document))
    code, out, err = run_cli(capsys, "run", "--spec", str(path), "--out", str(tmp_path / "r"))
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_unwritable_out_fails_before_any_claim_runs(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, out, err = run_cli(capsys, "run", CLAIM, "--quick", "--out", str(blocker / "records"))
    _assert_one_line_error(code, err, "--out")
    assert "run," not in out  # no claim ran


def test_version_json_and_strict(tmp_path, capsys, monkeypatch):
    code, out, _ = run_cli(capsys, "--version")
    assert code == 0 and out.startswith("catalogue ")
    code, out, _ = run_cli(capsys, "list", "--json", "--family", "lyu2022")
    listed = json.loads(out)
    assert code == 0 and {c["id"] for c in listed} == {c.id for c in registry.all_claims("lyu2022")}
    assert all(c["kind"] and c["controls"] for c in listed)
    code, out, _ = run_cli(capsys, "show", CLAIM, "--json", "--results", str(tmp_path))
    assert code == 0 and json.loads(out)["id"] == CLAIM
    # --strict: a verdict that disagrees with its source without a recorded reason exits 1
    claim = registry.get(CLAIM)
    broken = dataclasses.replace(
        claim,
        check=lambda p, ctx: claim.check(p, ctx).model_copy(
            update={"evidence": {"max_rel_err_direction": 1.0, "max_rel_err_norm_recursion": 0.0}}
        ),
    )
    monkeypatch.setitem(registry._CLAIMS, CLAIM, broken)
    argv = ("run", CLAIM, "--quick", "--out", str(tmp_path / "s"), "--no-progress")
    assert run_cli(capsys, *argv)[0] == 0
    code, _, err = run_cli(capsys, *argv, "--strict")
    assert code == 1 and "no reason is recorded" in err
