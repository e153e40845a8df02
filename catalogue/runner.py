"""Runs claims: seeding, errors as records, joblib parallelism (loky or dask), atomic storage."""

from __future__ import annotations

import datetime as dt
import functools
import json
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from threadpoolctl import threadpool_limits

from catalogue import provenance, registry, seeding, store
from catalogue.claim import Claim, ClaimContext
from catalogue.kernels import platform_info
from catalogue.parallel import Execution, map_unordered
from catalogue.record import Record
from catalogue.versions import versions
from constructions.specs import Spec

__all__ = ["Job", "plan_jobs", "run_job", "run_jobs"]


@dataclass(frozen=True)
class Job:
    """One claim to run: its id, parameters (JSON), mode and user seed."""

    claim_id: str
    params_json: str
    mode: str
    seed: int
    progress: bool = False  # progress bars of long training (stderr); never changes a number

    @property
    def spec_hash(self) -> str:
        return seeding.spec_hash({"claim": self.claim_id, "params": json.loads(self.params_json)})


def plan_jobs(claims: Sequence[Claim], mode: str, seed: int, params: Spec | None = None) -> list[Job]:
    """Jobs for ``claims`` in ``mode`` (quick/full/paper) or, with ``params``, one custom job.

    In paper mode a claim without a paper budget runs (and is recorded) in full mode: its full
    mode is its source's budget.
    """
    if params is not None:
        (claim,) = claims
        return [Job(claim.id, seeding.canonical_json(params), "custom", seed)]
    modes = {c.id: "full" if mode == "paper" and c.paper is None else mode for c in claims}
    return [Job(c.id, seeding.canonical_json(c.spec_for(modes[c.id])), modes[c.id], seed) for c in claims]


def run_job(job: Job, out_dir: Path | str | None = None, execution: Execution | None = None) -> Record:
    """Run one claim and return its record; an exception becomes ``verdict="error"``.

    Every claim runs on one torch thread and one BLAS thread: multithreaded reductions change
    round-off with the thread count, and the same spec must give the same numbers whether it runs
    alone or beside others (``--jobs`` parallelizes across claims, and inside ``parallel`` claims).
    ``out_dir`` is where the claim may keep files (its ``ctx.artifacts``).
    """
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(limits=1):
            return _run_job(job, None if out_dir is None else Path(out_dir), execution or Execution())
    finally:
        torch.set_num_threads(previous)


def _run_job(job: Job, out_dir: Path | None, execution: Execution) -> Record:
    claim = registry.get(job.claim_id)
    params = claim.params.model_validate_json(job.params_json)
    digest = job.spec_hash
    ctx = ClaimContext(
        spec_hash=digest,
        seed=job.seed,
        mode=job.mode,
        artifacts=out_dir,
        execution=execution,
        checkpoints=None if out_dir is None else out_dir / "checkpoints",
        progress=job.progress,
    )
    start = time.perf_counter()
    code = provenance.code_files(claim.check.__module__)
    common = dict(
        claim_id=claim.id,
        family=claim.family,
        title=claim.title,
        statement=claim.statement,
        source=claim.source,
        source_verdict=claim.source_verdict,
        expected_failure=claim.expected_failure_in(job.mode),
        spec=params.model_dump(mode="json"),
        spec_hash=digest,
        seed=job.seed,
        mode=job.mode,
        versions=versions(),
        platform=platform_info(),
        code_files=code,
        code_hash=provenance.digest(seeding.canonical_json(code)),
        content_hashes={},  # sealed by run_jobs when it stores the record
    )
    try:
        torch.manual_seed(ctx.seed_for("global"))  # only a backstop: checks draw from ctx
        outcome = claim.check(params, ctx)
    except Exception as exc:  # a failing claim is a record, never a crash of the run
        tb = traceback.extract_tb(exc.__traceback__)[-1]
        message = f"{type(exc).__name__}: {exc} (at {Path(tb.filename).name}:{tb.lineno})"
        return Record(
            **common,
            verdict="error",
            agrees=False,
            evidence={},
            thresholds={},
            error=message,
            seconds=time.perf_counter() - start,
            created_at=_now(),
        )
    verdict, checks = outcome.verdict, []
    try:
        if (claim.rule is None) == (verdict is None):
            raise ValueError("a claim declares a rule or returns a verdict, exactly one of the two")
        if claim.rule is not None:
            decision = claim.rule.decide(outcome.evidence, params)
            verdict, checks = decision.verdict, decision.checks
    except (KeyError, ValueError) as exc:  # a rule that cannot be applied is the claim's bug: an error record
        return Record(
            **common,
            verdict="error",
            agrees=False,
            evidence=outcome.evidence,
            thresholds={},
            error=f"verdict rule: {exc.args[0] if exc.args else exc}",
            seconds=time.perf_counter() - start,
            created_at=_now(),
        )
    return Record(
        **common,
        verdict=verdict,
        agrees=verdict == claim.source_verdict,
        evidence=outcome.evidence,
        thresholds=outcome.thresholds,
        checks=checks,
        figures=outcome.figures,
        tables=outcome.tables,
        notes=outcome.notes,
        seconds=time.perf_counter() - start,
        created_at=_now(),
    )


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _is_current(check: store.RecordCheck, job: Job) -> bool:
    """The rule of ``catalogue verify``: a valid record of the claim's current code, for this job."""
    record = check.record
    return (
        check.status == "current"
        and record is not None
        and record.verdict != "error"
        and record.spec_hash == job.spec_hash
        and record.seed == job.seed
        and record.mode == job.mode
    )


def run_jobs(
    jobs: Sequence[Job],
    out_dir: Path | str,
    *,
    n_jobs: int = 1,
    backend: str = "loky",
    scheduler: str | None = None,
    resume: bool = False,
    on_record: Callable[[Record], None] | None = None,
    on_skip: Callable[[Job], None] | None = None,
) -> list[Record]:
    """Run ``jobs`` and write each record to ``out_dir`` as soon as it finishes.

    With ``resume``, a job whose stored record is current (see :mod:`catalogue.store`: valid, and
    computed by the claim's present code) with the same spec hash, seed and mode, and is not an
    error, is skipped. ``n_jobs > 1`` or ``backend="dask"`` runs through joblib: claims
    registered as ``parallel`` run first, one at a time, each spreading its own tasks over all the
    workers; the others then run side by side. A KeyboardInterrupt leaves every finished record on
    disk.
    """
    execution = Execution(n_jobs, backend, scheduler)
    out_dir = Path(out_dir)
    todo = []
    for job in jobs:
        if resume and _is_current(store.check_record_file(store.record_path(out_dir, job.claim_id, job.mode)), job):
            if on_skip:
                on_skip(job)
        else:
            todo.append(job)
    records = []
    for record in _execute(todo, out_dir, execution):
        try:
            record = store.seal(record)
            store.write_record(out_dir, record)
        except (TypeError, ValueError) as exc:  # a record that cannot be serialized becomes an error record
            record = store.seal(
                record.model_copy(
                    update={
                        "verdict": "error",
                        "agrees": False,
                        "error": f"record not serializable: {exc}",
                        "evidence": {},
                        "thresholds": {},
                        "checks": [],
                        "figures": [],
                        "tables": [],
                    }
                )
            )
            store.write_record(out_dir, record)
        records.append(record)
        if on_record:
            on_record(record)
    return records


def _execute(jobs: Sequence[Job], out_dir: Path, execution: Execution) -> Iterator[Record]:
    inside = [job for job in jobs if registry.get(job.claim_id).parallel]
    for job in inside:
        yield run_job(job, out_dir, execution)
    rest = [job for job in jobs if job not in inside]
    if execution.serial:
        for job in rest:
            yield run_job(job, out_dir)
        return
    yield from map_unordered(functools.partial(run_job, out_dir=out_dir), rest, execution)
