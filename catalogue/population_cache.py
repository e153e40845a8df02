"""The benchmark's stored model rows: train what is missing of a population, cache, tabulate, score.

A row (:func:`constructions.population_rows.measure_member`) is cached per model, in memory and
under ``<records>/benchmark/models/<key>.json``, with the trained weights in ``<key>.pt`` (not
committed: about 40 MB for the five seeds; a measure scored later loads them instead of training).
The key covers the member's spec, the user seed, the rescaling strength, the panel, the library
versions, the pinned kernel paths and the sha256 of every file in the row module's import closure:
an edit to the trainer, a construction, an evaluator or the panel retrains, an edit to the
catalogue (this cache, a claim, the report) does not. A rerun or a larger grid trains only what is
new. The seeds of a member are derived here, from its spec hash and the user seed, so a model is
the same in every grid that contains it.

Not ``joblib.Memory`` (installed with scikit-learn): it keys a call on the cached function's own
source and arguments, so an edit to the trainer or an evaluator that the row imports would not
invalidate it, and it stores pickles; a row here is keyed on the whole import closure and stored as
JSON that is committed beside the records, where a reader can diff and verify it.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from catalogue import provenance, seeding
from catalogue.atomic import atomic_write_bytes, atomic_write_text
from catalogue.claim import ClaimContext
from catalogue.kernels import PINNED
from catalogue.parallel import map_unordered
from catalogue.versions import versions
from constructions.population_grids import data_axes
from constructions.population_rows import MEASURES, RESCALINGS, MemberTask, measure_member
from constructions.populations import Population, task_of
from evaluators.scores import (
    FixedDataScores,
    Scores,
    grid_completeness,
    included,
    measure_failures,
    score_fixed_data,
    score_population,
)

__all__ = [
    "evaluate_population",
    "member_task",
    "measure_population",
    "stored_weights",
    "population_table",
    "column_scores",
    "models_key",
    "population_scores",
]

_MEMO: dict[str, dict[str, Any]] = {}


@functools.lru_cache(maxsize=1)
def _code_fingerprint() -> dict[str, str]:
    """Library versions, kernel paths and the sha256 of every source file a row depends on."""
    files = provenance.code_files("constructions.population_rows")
    kernels = {name: os.environ.get(name, "auto") for name in PINNED}  # rows computed on other kernel paths differ
    return {**versions(), **kernels, "code": provenance.digest(seeding.canonical_json(files))}


def member_seeds(spec, member_hash: str, user_seed: int) -> dict[str, int]:
    """Every stream of one member: its data from its task (members sharing a task share their
    draws), its training, measures and rescalings from its own spec hash."""
    seeds = {"data": seeding.derive_seed(seeding.spec_hash(task_of(spec)), 0, user_seed, "data")}
    for tag in ("train", *(f"rescale:{kind}" for kind in RESCALINGS)):
        seeds[tag] = seeding.derive_seed(member_hash, 0, user_seed, tag)
    for name in MEASURES:
        seeds[f"measure:{name}"] = seeding.derive_seed(member_hash, 0, user_seed, f"measure:{name}") % 2**31
    return seeds


def member_task(member, user_seed: int, rescale_max: float) -> MemberTask:
    spec_json = seeding.canonical_json(member)
    model = json.loads(spec_json)
    key = seeding.spec_hash(
        {
            "model": model,
            "user_seed": user_seed,
            "rescale_max": rescale_max,
            "panel": list(MEASURES),
            "rescalings": list(RESCALINGS),
            "code": _code_fingerprint(),
        }
    )
    member_hash = seeding.spec_hash(model)
    seeds = member_seeds(member, member_hash, user_seed)
    return MemberTask(spec_json, member_hash, seeds, rescale_max, key)


def _cache_path(ctx: ClaimContext, key: str) -> Path | None:
    return None if ctx.artifacts is None else ctx.artifacts / "benchmark" / "models" / f"{key}.json"


def _read_cached(path: Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"), parse_constant=float)
    except (OSError, ValueError):
        return None


def stored_weights(ctx: ClaimContext, key: str) -> dict | None:
    """The trained weights stored beside a row, or None (not stored, unreadable, or no records)."""
    path = _cache_path(ctx, key)
    if path is None or not path.with_suffix(".pt").is_file():
        return None
    try:
        return torch.load(path.with_suffix(".pt"), weights_only=True)
    except Exception:  # a torn or foreign file: retrain rather than trust it
        return None


def measure_population(population: Population, name: str, ctx: ClaimContext, *, rescale_max: float) -> list[dict]:
    """One row per member (grid order): trained, measured and cached, the missing ones in parallel."""
    tasks = [member_task(m, ctx.seed, rescale_max) for m in population.members()]
    rows: dict[str, dict] = {}
    todo = []
    for task in tasks:
        cached = _MEMO.get(task.key) or _read_cached(_cache_path(ctx, task.key))
        if cached is not None:
            rows[task.key] = _MEMO[task.key] = cached
        else:
            todo.append(task)
    if todo:
        from tqdm import tqdm

        bar = tqdm(
            total=len(todo),
            desc=f"benchmark {name}",
            unit="model",
            file=sys.stderr,
            disable=None if ctx.progress else True,
            leave=False,
        )
        for row, weights in map_unordered(measure_member, todo, ctx.execution):
            path = _cache_path(ctx, row["key"])
            if path is not None:
                buffer = io.BytesIO()
                torch.save(weights, buffer)
                atomic_write_bytes(path.with_suffix(".pt"), buffer.getvalue())  # first: a row never lacks them
                atomic_write_text(path, json.dumps(row, allow_nan=True))
            rows[row["key"]] = _MEMO[row["key"]] = row
            bar.update(1)
        bar.close()
    return [rows[t.key] for t in tasks]


def population_table(rows: Sequence[dict], hyperparameters: Sequence[str]) -> str:
    """The tidy per-model CSV: identity, hyperparameters, losses, errors, gap, every measure ± error."""
    first = ["spec_hash", "seed", "kind", *hyperparameters]
    columns = first + [c for c in rows[0] if c not in first and c != "key"]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({c: _csv_value(row.get(c)) for c in columns})
    return buf.getvalue()


def _csv_value(v: Any) -> Any:
    if isinstance(v, float):
        return "" if math.isnan(v) else repr(v)
    return v


def models_key(rows: Sequence[dict]) -> str:
    """What the bootstrap draws are seeded from: the models (their spec hashes), not the cache keys,
    so an edit to the code retrains but does not reshuffle the resamples."""
    return seeding.spec_hash({"models": [r["spec_hash"] for r in rows]})


def column_scores(
    rows: Sequence[dict], hyperparameters: Sequence[str], axes: Sequence[str], column: str, seed: int, resamples: int
) -> tuple[Scores, FixedDataScores]:
    """One measure's scores pooled over the data axes and on fixed data, each bootstrap on its own
    stream: a user's measure scored here gets the draws a panel column gets."""
    key = models_key(rows)
    pooled = seeding.numpy_rng(seeding.derive_seed(key, 0, seed, f"bootstrap:{column}"))
    fixed = seeding.numpy_rng(seeding.derive_seed(key, 0, seed, f"fixed-data:{column}"))
    return (
        score_population(rows, hyperparameters, column, pooled, resamples),
        score_fixed_data(rows, hyperparameters, axes, column, fixed, resamples),
    )


@functools.lru_cache(maxsize=8)
def _cached_scores(rows_json: str, hyperparameters: tuple[str, ...], axes: tuple[str, ...], seed: int, resamples: int):
    rows = json.loads(rows_json, parse_constant=float)
    return {column: column_scores(rows, hyperparameters, axes, column, seed, resamples) for column in MEASURES}


def population_scores(
    rows: Sequence[dict], hyperparameters: Sequence[str], axes: Sequence[str], seed: int, resamples: int
) -> tuple[dict[str, Scores], dict[str, FixedDataScores]]:
    """Every panel measure's scores, pooled and on fixed data, shared by the claims of one run."""
    rows_json = json.dumps(list(rows), allow_nan=True, sort_keys=True)
    both = _cached_scores(rows_json, tuple(hyperparameters), tuple(axes), seed, resamples)
    return {m: s[0] for m, s in both.items()}, {m: s[1] for m, s in both.items()}


def evaluate_population(
    population: Population,
    name: str,
    ctx: ClaimContext,
    *,
    rescale_max: float,
    resamples: int,
    min_models: int,
    oracle_measure: str | None = None,
    shuffled_measures: Sequence[str] = (),
) -> dict[str, Any]:
    """A population's rows, its included models, their scores and fixed-data scores (none below
    ``min_models``), its hyperparameters and data axes, a summary
    and, with an artifacts directory, its per-model CSV. The controls act on the included models:
    ``oracle_measure`` takes each model's gap as its value, ``shuffled_measures`` are permuted across
    models (seeded by the population's name)."""
    rows = measure_population(population, name, ctx, rescale_max=rescale_max)
    hyper, axes = population.hyperparameters, data_axes(population)
    kept = included(rows)
    if oracle_measure is not None:
        kept = [{**row, oracle_measure: row["gap"]} for row in kept]
    if shuffled_measures:
        order = ctx.rng(f"shuffle-{name}").permutation(len(kept))
        kept = [{**row, **{m: kept[j][m] for m in shuffled_measures}} for row, j in zip(kept, order, strict=True)]
    csv_path = None
    if ctx.artifacts is not None:
        digest = seeding.spec_hash({"population": population.model_dump(mode="json"), "seed": ctx.seed})
        csv_path = ctx.artifacts / "benchmark" / f"{name}-{digest[:10]}.csv"
        atomic_write_text(csv_path, population_table(rows, hyper))
    scores, fixed = population_scores(kept, hyper, axes, ctx.seed, resamples) if len(kept) >= min_models else ({}, {})
    complete, _, _ = grid_completeness({h: [r[h] for r in kept] for h in hyper})
    return {
        "rows": rows,
        "kept": kept,
        "hyperparameters": hyper,
        "data_axes": axes,
        "scores": scores,
        "fixed_data_scores": fixed,
        "summary": {
            "models": len(rows),
            "included": len(kept),
            "excluded": len(rows) - len(kept),
            "diverged": sum(bool(r["diverged"]) for r in rows),
            "grid_complete_after_exclusion": complete,
            "data_axes": list(axes),
            "data_cells": len({tuple(r[a] for a in axes) for r in kept}),
            "max_rescale_function_change": max((r["rescale_function_change"] for r in kept), default=math.nan),
            "measure_failures": measure_failures(rows),
            "table": None if csv_path is None else str(csv_path),
        },
    }
