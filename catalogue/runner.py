"""Runs claims: seeding, errors as records, joblib parallelism (loky or dask), atomic storage."""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import json
import math
import multiprocessing
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from joblib.externals.loky.process_executor import TerminatedWorkerError
from threadpoolctl import threadpool_limits

from catalogue import provenance, registry, seeding, store
from catalogue.claim import Claim, ClaimContext, Outcome
from catalogue.kernels import platform_info
from catalogue.parallel import Execution, map_unordered
from catalogue.record import Record, SeedRun
from catalogue.rules import Check, lookup
from catalogue.verdicts import across_seeds
from catalogue.versions import versions
from constructions.specs import Spec

__all__ = ["Job", "plan_jobs", "run_job", "run_jobs"]


@dataclass(frozen=True)
class Job:
    """One claim to run: its id, parameters (JSON), mode and user seed; ``control`` names the
    negative control whose parameters ``params_json`` holds (None: the claim itself); ``seeds``
    are further user seeds whose verdicts are pooled with ``seed``'s (:func:`across_seeds`)."""

    claim_id: str
    params_json: str
    mode: str
    seed: int
    progress: bool = False  # progress bars of long training (stderr); never changes a number
    control: str | None = None
    seeds: tuple[int, ...] = ()  # further user seeds pooled with ``seed`` into one verdict
    plugin: str | None = None  # the plugin file that registers the claim (a worker loads it again)

    @property
    def spec_hash(self) -> str:
        return seeding.spec_hash({"claim": self.claim_id, "params": json.loads(self.params_json)})


def plan_jobs(
    claims: Sequence[Claim],
    mode: str,
    seed: int,
    params: Spec | None = None,
    *,
    controls: bool = False,
    sweep: bool = True,
) -> list[Job]:
    """Jobs for ``claims`` in ``mode`` (quick/full/paper) or, with ``params``, one custom job.

    In paper mode a claim without a paper budget runs (and is recorded) in full mode: its full
    mode is its source's budget. With ``controls`` each claim's negative controls follow it, on
    the same mode's spec with the control's changes (in paper mode: not run, they are checks of
    the verdict code and the full mode shows them). With ``sweep``, a full-mode claim that pools
    ``k = claim.seeds`` seeds runs the user seeds ``seed … seed + k − 1`` (``sweep=False``: ``seed``
    alone, as ``catalogue run --seed S`` does); its controls run at ``seed``.
    """
    if params is not None:
        (claim,) = claims
        specs = {claim.id: (params, "custom")}
    else:
        modes = {c.id: "full" if mode == "paper" and c.paper is None else mode for c in claims}
        specs = {c.id: (c.spec_for(modes[c.id]), modes[c.id]) for c in claims}
    jobs = []
    for claim in claims:
        spec, job_mode = specs[claim.id]
        more = tuple(range(seed + 1, seed + claim.seeds)) if sweep and job_mode == "full" else ()
        plugin = None if (file := registry.plugin_file(claim)) is None else str(file)
        jobs.append(Job(claim.id, seeding.canonical_json(spec), job_mode, seed, seeds=more, plugin=plugin))
        if controls and job_mode != "paper":
            jobs += [
                Job(claim.id, seeding.canonical_json(c.apply(spec)), job_mode, seed, control=c.name, plugin=plugin)
                for c in claim.controls
            ]
    return jobs


def run_job(job: Job, out_dir: Path | str | None = None, execution: Execution | None = None) -> Record:
    """Run one claim and return its record; an exception becomes ``verdict="error"``.

    Every claim runs on one torch thread and one BLAS thread: multithreaded reductions change
    round-off with the thread count, and the same spec must give the same numbers whether it runs
    alone or beside others (``--jobs`` parallelizes across claims, and inside ``parallel`` claims).
    ``out_dir`` is where the claim may keep files (its ``ctx.artifacts``).
    """
    if job.plugin is not None:  # a fresh worker knows only the built-in and installed claims
        registry.load_plugin(job.plugin)
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(limits=1):
            return _run_job(job, None if out_dir is None else Path(out_dir), execution or Execution())
    finally:
        torch.set_num_threads(previous)


def _run_job(job: Job, out_dir: Path | None, execution: Execution) -> Record:
    claim = registry.get(job.claim_id)
    control = None if job.control is None else claim.control(job.control)
    params = claim.params.model_validate_json(job.params_json)
    ctx = ClaimContext(
        spec_hash=job.spec_hash,
        seed=job.seed,
        mode=job.mode,
        artifacts=out_dir,
        execution=execution,
        checkpoints=None if out_dir is None else out_dir / "checkpoints",
        progress=job.progress,
    )
    start = time.perf_counter()
    common = _record_fields(job)
    outcome, verdict, checks, error = _decide(claim, params, ctx)
    runs: list[SeedRun] = []
    if job.seeds and error is None:
        runs.append(SeedRun(seed=job.seed, verdict=verdict, values=_checked_values(claim, outcome)))
        for seed in job.seeds:
            other, seed_verdict, _, seed_error = _decide(claim, params, dataclasses.replace(ctx, seed=seed))
            if seed_error is not None:
                error = f"seed {seed}: {seed_error}"
                break
            runs.append(SeedRun(seed=seed, verdict=seed_verdict, values=_checked_values(claim, other)))
        verdict = across_seeds([r.verdict for r in runs])
    if error is not None:
        return Record(
            **common,
            verdict="error",
            agrees=False,
            evidence=outcome.evidence if outcome is not None else {},
            thresholds={},
            error=error,
            seconds=time.perf_counter() - start,
            created_at=_now(),
        )
    return Record(
        **common,
        verdict=verdict,
        agrees=control.came_out(verdict) if control else verdict == claim.source_verdict,
        evidence=outcome.evidence,
        thresholds=outcome.thresholds,
        checks=checks,
        seeds=runs,
        figures=outcome.figures,
        tables=outcome.tables,
        notes=outcome.notes,
        seconds=time.perf_counter() - start,
        created_at=_now(),
    )


def _record_fields(job: Job) -> dict[str, Any]:
    """Everything a record of ``job`` says besides what the run measured (its verdict and numbers)."""
    claim = registry.get(job.claim_id)
    control = None if job.control is None else claim.control(job.control)
    params = claim.params.model_validate_json(job.params_json)
    code = provenance.code_files(claim.check.__module__)
    return dict(
        claim_id=claim.id,
        family=claim.family,
        title=claim.title,
        statement=claim.statement,
        source=claim.source,
        source_verdict=claim.source_verdict,
        kind=claim.kind,
        control=job.control,
        expected_failure=None if control else claim.expected_failure_in(job.mode),
        spec=params.model_dump(mode="json"),
        spec_hash=job.spec_hash,
        seed=job.seed,
        mode=job.mode,
        versions=versions(),
        platform=platform_info(),
        code_files=code,
        code_hash=provenance.digest(seeding.canonical_json(code)),
        content_hashes={},  # sealed by run_jobs when it stores the record
    )


def _decide(claim: Claim, params: Spec, ctx: ClaimContext) -> tuple[Outcome | None, str, list[Check], str | None]:
    """Run the check at ``ctx``'s seed and apply its rule: (outcome, verdict, checks, error message).

    An exception of the check, or a rule that cannot be applied (the claim's bug), is an error
    message, never a crash of the run.
    """
    try:
        torch.manual_seed(ctx.seed_for("global"))  # only a backstop: checks draw from ctx
        outcome = claim.check(params, ctx)
    except (Exception, SystemExit) as exc:  # a claim that calls sys.exit is an error too, not the end of the run
        tb = traceback.extract_tb(exc.__traceback__)[-1]
        return None, "error", [], f"{type(exc).__name__}: {exc} (at {Path(tb.filename).name}:{tb.lineno})"
    try:
        if (claim.rule is None) == (outcome.verdict is None):
            raise ValueError("a claim declares a rule or returns a verdict, exactly one of the two")
        if claim.rule is None:
            return outcome, outcome.verdict, [], None
        decision = claim.rule.decide(outcome.evidence, params)
        return outcome, decision.verdict, decision.checks, None
    except (KeyError, ValueError) as exc:
        return outcome, "error", [], f"verdict rule: {exc.args[0] if exc.args else exc}"


def _checked_values(claim: Claim, outcome: Outcome) -> dict[str, Any]:
    """What a seed's verdict rests on: every evidence path its rule reads (quantities and measured
    thresholds), or, for a claim that decides its own verdict, the evidence's top-level numbers."""
    if claim.rule is not None:
        return {path: lookup(outcome.evidence, path) for path in dict.fromkeys(claim.rule.reads(outcome.evidence))}
    return {k: v for k, v in outcome.evidence.items() if isinstance(v, int | float | bool)}


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
        and record.control == job.control
        and tuple(r.seed for r in record.seeds[1:]) == job.seeds
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
        if resume and _is_current(
            store.check_record_file(store.record_path(out_dir, job.claim_id, job.mode, job.control)), job
        ):
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
    if not execution.serial:
        rest = _longest_first(rest, out_dir)
    if execution.serial:
        for job in rest:
            yield run_job(job, out_dir)
        return
    finished: set[tuple] = set()
    try:
        for record in map_unordered(functools.partial(run_job, out_dir=out_dir), rest, execution):
            finished.add((record.claim_id, record.mode, record.control))
            yield record
    except (TerminatedWorkerError, BrokenProcessPool):
        # a worker died (killed by the system, e.g. out of memory): the pool is gone with every job
        # it held. Each unfinished job runs again in a process of its own, so only the one that
        # kills its process is lost, and it becomes an error record.
        for job in rest:
            if (job.claim_id, job.mode, job.control) not in finished:
                yield _run_isolated(job, out_dir)


def _longest_first(jobs: Sequence[Job], out_dir: Path) -> list[Job]:
    """``jobs`` by the seconds their stored records took, longest first (jobs without one first of all).

    Workers take jobs in this order, so the long ones start early and the short ones fill in: the
    greedy longest-processing-time schedule, within 4/3 of the shortest possible wall time (Graham
    1969). In plan order a long claim near the end of the alphabet ran alone at the end of the main
    job. The order changes no number: every job is seeded from its spec.
    """

    def expected(job: Job) -> float:
        try:
            stored = json.loads(store.record_path(out_dir, job.claim_id, job.mode, job.control).read_text())
            return float(stored["seconds"])
        except (OSError, ValueError, KeyError, TypeError):
            return math.inf

    return sorted(jobs, key=expected, reverse=True)  # stable: ties keep plan order


def _run_isolated(job: Job, out_dir: Path) -> Record:
    """``run_job`` in a fresh process; a process that dies gives an error record instead."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        try:
            return pool.submit(run_job, job, out_dir).result()
        except BrokenProcessPool:
            return Record(
                **_record_fields(job),
                verdict="error",
                agrees=False,
                evidence={},
                thresholds={},
                error="worker killed: its process died without a result (out of memory?)",
                seconds=0.0,
                created_at=_now(),
            )
