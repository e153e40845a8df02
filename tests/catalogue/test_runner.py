"""Runner: determinism, error records, resume, interruption, and the dask backend."""

import dataclasses
import json

import pytest

from catalogue import registry, runner, store
from catalogue.claim import Outcome

FAST = ["lyu2022.effective-lr-identity", "lyu2022.scale-invariance-identities"]


def _jobs(ids, seed=0):
    return runner.plan_jobs([registry.get(i) for i in ids], "quick", seed)


def test_same_spec_same_numbers(tmp_path):
    a = runner.run_jobs(_jobs(FAST), tmp_path / "a")
    b = runner.run_jobs(_jobs(FAST), tmp_path / "b")
    assert [r.evidence for r in a] == [r.evidence for r in b]
    assert [r.spec_hash for r in a] == [r.spec_hash for r in b]


def test_seed_changes_the_draws(tmp_path):
    a = runner.run_jobs(_jobs(FAST[:1], seed=0), tmp_path / "a")[0]
    b = runner.run_jobs(_jobs(FAST[:1], seed=1), tmp_path / "b")[0]
    assert a.evidence["final_norm"] != b.evidence["final_norm"]


@pytest.fixture
def failing_claim(monkeypatch):
    def explode(params, ctx):
        raise RuntimeError("boom")

    base = registry.get(FAST[0])
    claim = dataclasses.replace(base, id="lyu2022.always-fails", check=explode)
    monkeypatch.setitem(registry._CLAIMS, claim.id, claim)
    return claim


def test_error_is_recorded_and_others_still_run(tmp_path, failing_claim):
    records = runner.run_jobs(_jobs([failing_claim.id, FAST[0]]), tmp_path)
    by_id = {r.claim_id: r for r in records}
    assert by_id[failing_claim.id].verdict == "error"
    assert "RuntimeError: boom" in by_id[failing_claim.id].error
    assert not by_id[failing_claim.id].agrees
    assert by_id[FAST[0]].verdict == "holds"
    assert set(store.load_records(tmp_path)) == {failing_claim.id, FAST[0]}


def test_resume_skips_current_records_only(tmp_path):
    first = runner.run_jobs(_jobs(FAST), tmp_path)
    assert len(first) == 2
    skipped = []
    again = runner.run_jobs(_jobs(FAST), tmp_path, resume=True, on_skip=skipped.append)
    assert again == [] and len(skipped) == 2
    other_seed = runner.run_jobs(_jobs(FAST, seed=3), tmp_path, resume=True)
    assert len(other_seed) == 2  # a different seed is a different spec run


def test_interrupt_keeps_finished_records(tmp_path, monkeypatch):
    real = runner.run_job
    calls = []

    def interrupted(job, *args, **kwargs):
        calls.append(job.claim_id)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(job, *args, **kwargs)

    monkeypatch.setattr(runner, "run_job", interrupted)
    with pytest.raises(KeyboardInterrupt):
        runner.run_jobs(_jobs(FAST), tmp_path)
    assert list(store.load_records(tmp_path)) == [FAST[0]]


def test_loky_backend_matches_serial(tmp_path):
    serial = runner.run_jobs(_jobs(FAST), tmp_path / "s")
    parallel = runner.run_jobs(_jobs(FAST), tmp_path / "p", n_jobs=2)
    assert {r.claim_id: r.evidence for r in serial} == {r.claim_id: r.evidence for r in parallel}


def test_dask_backend_on_local_cluster(tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None
    ) as cluster:
        records = runner.run_jobs(_jobs(FAST), tmp_path, n_jobs=2, backend="dask", scheduler=cluster.scheduler_address)
    assert sorted(r.claim_id for r in records) == sorted(FAST)
    assert all(r.verdict == "holds" for r in records)
    serial = runner.run_jobs(_jobs(FAST), tmp_path / "s")
    assert {r.claim_id: r.evidence for r in serial} == {r.claim_id: r.evidence for r in records}


def test_outcome_evidence_is_json_clean():
    import numpy as np
    import torch

    out = Outcome(
        verdict="holds",
        evidence={"a": np.float64(1.5), "b": torch.tensor([1.0, 2.0]), "c": float("nan")},
    )
    assert out.evidence == {"a": 1.5, "b": [1.0, 2.0], "c": "nan"}


def test_expected_failure_is_recorded_only_in_its_modes(tmp_path, monkeypatch):
    base = registry.get(FAST[0])
    claim = dataclasses.replace(base, expected_failure="too small here", expected_failure_modes=("quick",))
    monkeypatch.setitem(registry._CLAIMS, claim.id, claim)
    (quick,) = runner.run_jobs(runner.plan_jobs([claim], "quick", 0), tmp_path / "q")
    assert quick.expected_failure == "too small here"
    assert claim.expected_failure_in("full") is None and claim.expected_failure_in("custom") is None
    with pytest.raises(ValueError, match="expected_failure_modes"):
        registry.register(
            id="lyu2022.bad-modes",
            title="t",
            statement="s.",
            kind="identity",
            source=base.source,
            source_verdict="holds",
            params=base.params,
            quick={},
            full={},
            expected_failure="x",
            expected_failure_modes=("fast",),
        )(lambda p, ctx: None)


def test_a_killed_worker_is_that_claims_error_and_the_others_are_stored(tmp_path, monkeypatch):
    from tests.catalogue import faults

    monkeypatch.setattr(runner, "run_job", faults.run_or_die)
    ids = [faults.KILLED, "lyu2022.scale-invariance-identities", "dinh2017.multiple-eigenvalues-inflated"]
    records = runner.run_jobs(_jobs(ids), tmp_path, n_jobs=2)
    by_id = {r.claim_id: r for r in records}
    assert sorted(by_id) == sorted(ids)
    assert by_id[faults.KILLED].verdict == "error" and "worker killed" in by_id[faults.KILLED].error
    assert all(by_id[i].verdict == "holds" for i in ids[1:])
    assert sorted(p.stem for p in tmp_path.glob("*.json")) == sorted(ids)


def test_a_claim_that_calls_sys_exit_is_an_error_record(tmp_path, monkeypatch):
    claim = registry.get(FAST[0])

    def exits(params, ctx):
        raise SystemExit(3)

    monkeypatch.setitem(registry._CLAIMS, claim.id, dataclasses.replace(claim, check=exits))
    records = runner.run_jobs(_jobs(FAST), tmp_path)
    assert [r.verdict for r in records] == ["error", "holds"]
    assert records[0].error.startswith("SystemExit: 3")


def test_parallel_runs_start_with_the_longest_stored_jobs(tmp_path):
    jobs = _jobs(["lyu2022.effective-lr-identity", "lyu2022.scale-invariance-identities", "dinh2017.hessian-block-law"])
    for job, seconds in zip(jobs[1:], (5.0, 50.0), strict=True):  # the first job has no stored record
        path = store.record_path(tmp_path, job.claim_id, job.mode, job.control)
        path.write_text(json.dumps({"seconds": seconds}))
    ordered = runner._longest_first(jobs, tmp_path)
    assert [j.claim_id for j in ordered] == [jobs[0].claim_id, jobs[2].claim_id, jobs[1].claim_id]
