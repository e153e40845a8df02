"""Runs claims: seeding, errors as records, joblib parallelism (loky or dask), atomic storage."""

from __future__ import annotations

import datetime as dt
import functools
import json
import platform
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numpy as np
import scipy
import torch
from threadpoolctl import threadpool_limits

from catalogue import registry, seeding, store
from catalogue.claim import Claim, ClaimContext, Record
from catalogue.parallel import Execution, map_unordered
from constructions.specs import Spec

__all__ = ["Job", "plan_jobs", "run_job", "run_jobs", "versions"]


@dataclass(frozen=True)
class Job:
    """One claim to run: its id, parameters (JSON), mode and user seed."""

    claim_id: str
    params_json: str
    mode: str
    seed: int

    @property
    def spec_hash(self) -> str:
        return seeding.spec_hash({"claim": self.claim_id, "params": json.loads(self.params_json)})


def versions() -> dict[str, str]:
    """Versions of everything that can change a number."""
    try:
        package = metadata.version("flatness-catalogue")
    except metadata.PackageNotFoundError:
        package = "0+unknown"
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "flatness-catalogue": package,
    }


def plan_jobs(claims: Sequence[Claim], mode: str, seed: int, params: Spec | None = None) -> list[Job]:
    """Jobs for ``claims`` in ``mode`` (quick/full) or, with ``params``, one custom job."""
    if params is not None:
        (claim,) = claims
        return [Job(claim.id, seeding.canonical_json(params), "custom", seed)]
    return [Job(c.id, seeding.canonical_json(c.spec_for(mode)), mode, seed) for c in claims]


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
    ctx = ClaimContext(spec_hash=digest, seed=job.seed, mode=job.mode, artifacts=out_dir, execution=execution)
    start = time.perf_counter()
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
    return Record(
        **common,
        verdict=outcome.verdict,
        agrees=outcome.verdict == claim.source_verdict,
        evidence=outcome.evidence,
        thresholds=outcome.thresholds,
        figures=outcome.figures,
        tables=outcome.tables,
        notes=outcome.notes,
        seconds=time.perf_counter() - start,
        created_at=_now(),
    )


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _is_current(record: Record | None, job: Job) -> bool:
    return (
        record is not None
        and record.verdict != "error"
        and record.spec_hash == job.spec_hash
        and record.seed == job.seed
        and record.mode == job.mode
        and record.versions.get("flatness-catalogue") == versions()["flatness-catalogue"]
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

    With ``resume``, a job whose stored record has the same spec hash, seed and mode (and is not
    an error) is skipped. ``n_jobs > 1`` or ``backend="dask"`` runs through joblib: claims
    registered as ``parallel`` run first, one at a time, each spreading its own tasks over all the
    workers; the others then run side by side. A KeyboardInterrupt leaves every finished record on
    disk.
    """
    execution = Execution(n_jobs, backend, scheduler)
    out_dir = Path(out_dir)
    todo = []
    for job in jobs:
        if resume and _is_current(store.read_record(store.record_path(out_dir, job.claim_id)), job):
            if on_skip:
                on_skip(job)
        else:
            todo.append(job)
    records = []
    for record in _execute(todo, out_dir, execution):
        try:
            store.write_record(out_dir, record)
        except (TypeError, ValueError) as exc:  # a record that cannot be serialized becomes an error record
            record = record.model_copy(
                update={
                    "verdict": "error",
                    "agrees": False,
                    "error": f"record not serializable: {exc}",
                    "evidence": {},
                    "thresholds": {},
                    "figures": [],
                    "tables": [],
                }
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
