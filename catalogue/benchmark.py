"""The measure benchmark's machinery: train a population model by model, measure each model (as
trained and after a random function-preserving rescaling), cache, tabulate and score.

Each member of a :class:`~constructions.populations.Population` is one task: build and train it
(seeded from its own spec and the user seed, so a model is the same in every grid that contains
it), evaluate the measure panel on the training objective, then again after each of two random
function-preserving rescalings of the hidden neurons (incoming weights and bias ×α, outgoing ÷α:
the same function for ReLU nets), with ``α = exp(u)``, ``u ~ U(−ln A, ln A)``:

* ``neuron_alpha``: an independent α_j for every hidden neuron;
* ``layer_T_alpha``: one α per hidden layer (Dinh et al. 2017's T_α), drawn per model.

Over a wide layer the i.i.d. per-neuron factors' extremes are nearly the same for every model, so
the two probe different things: the second changes a model's scale as a whole. Rows are cached per
model, by a key that also covers the panel, the rescalings, the library versions and a hash of
the code a row depends on, in memory and under ``<records>/benchmark/models/``; a rerun or a
larger grid trains only what is new.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from pydantic import TypeAdapter
from threadpoolctl import threadpool_limits

from catalogue import provenance, scoring, seeding
from catalogue.atomic import atomic_write_text
from catalogue.claim import ClaimContext
from catalogue.kernels import PINNED
from catalogue.measures import PANEL, panel_for
from catalogue.parallel import map_unordered
from catalogue.versions import versions
from constructions import symmetries
from constructions.populations import (
    ModelSpec,
    Population,
    TrainedModel,
    task_of,
    train_model,
)
from evaluators import Objective, mse, zero_one_error

__all__ = [
    "MEASURES",
    "RESCALINGS",
    "random_rescaling",
    "ModelTask",
    "evaluate_model",
    "measure_population",
    "population_table",
    "population_scores",
    "model_task",
    "Scores",
    "score_population",
    "included",
    "measure_failures",
    "rescaled_tau",
]

MEASURES: tuple[str, ...] = tuple(m.name for m in PANEL)
# The random rescalings, named like the symmetries of catalogue.measures.INVARIANCE; a measure's
# value after one is the column "<rescaling>:<measure>".
RESCALINGS: dict[str, str] = {
    "neuron_alpha": "an independent α_j per hidden neuron",
    "layer_T_alpha": "one α per hidden layer (Dinh's T_α)",
}
_MODEL_SPEC = TypeAdapter(ModelSpec)
_MEMO: dict[str, dict[str, Any]] = {}


@dataclass(frozen=True)
class ModelTask:
    """One model to train and measure (plain data, so it travels to loky and dask workers)."""

    spec_json: str
    user_seed: int
    rescale_max: float
    key: str


@functools.lru_cache(maxsize=1)
def _code_fingerprint() -> dict[str, str]:
    """Library versions and the sha256 of every source file a row depends on (this module and the
    import closures of the populations, the panel and the symmetries): an edit to the trainer, a
    construction, an evaluator or the panel's settings invalidates the cached rows, an edit
    elsewhere does not."""
    files = {"catalogue/benchmark.py": provenance.digest(Path(__file__).read_bytes())}
    for module in ("constructions.populations", "constructions.symmetries", "catalogue.measures"):
        files.update(provenance.code_files(module))
    kernels = {name: os.environ.get(name, "auto") for name in PINNED}  # rows computed on other kernel paths differ
    return {**versions(), **kernels, "code": provenance.digest(seeding.canonical_json(files))}


def model_task(member, user_seed: int, rescale_max: float) -> ModelTask:
    spec_json = seeding.canonical_json(member)
    key = seeding.spec_hash(
        {
            "model": json.loads(spec_json),
            "user_seed": user_seed,
            "rescale_max": rescale_max,
            "panel": list(MEASURES),
            "rescalings": list(RESCALINGS),
            "code": _code_fingerprint(),
        }
    )
    return ModelTask(spec_json, user_seed, rescale_max, key)


def _metrics(trained: TrainedModel, model: torch.nn.Module) -> dict[str, float]:
    with torch.no_grad():
        out, out_test = model(trained.x), model(trained.x_test)
    train_loss, test_loss = float(mse(out, trained.y)), float(mse(out_test, trained.y_test))
    row = {"train_loss": train_loss, "test_loss": test_loss, "train_error": math.nan, "test_error": math.nan}
    if trained.classifier:
        row["train_error"] = zero_one_error(out, trained.y)
        row["test_error"] = zero_one_error(out_test, trained.y_test)
        row["gap"] = row["test_error"] - row["train_error"]  # Jiang et al.: the gap of the 0-1 error
    else:
        row["gap"] = test_loss - train_loss
    return row


def random_rescaling(model: torch.nn.Sequential, kind: str, rescale_max: float, generator: torch.Generator):
    """Every hidden layer's neurons ×α (log-uniform in [1/A, A]), compensated by the next layer.

    ``kind`` is a key of :data:`RESCALINGS`: one α per neuron, or one shared by the layer.
    """
    if kind not in RESCALINGS:
        raise ValueError(f"unknown rescaling {kind!r}; rescalings are {', '.join(RESCALINGS)}")
    out = model
    for k, layer in enumerate(symmetries.linear_layers(model)[:-1]):
        draws = layer.out_features if kind == "neuron_alpha" else 1
        u = (torch.rand(draws, generator=generator, dtype=torch.float64) * 2 - 1) * math.log(rescale_max)
        out = symmetries.neuron_rescale(out, k, torch.exp(u).expand(layer.out_features))
    return out


def _panel(
    obj: Objective, member_hash: str, user_seed: int, prefix: str
) -> tuple[dict[str, float], list[tuple[str, str]]]:
    row: dict[str, float] = {}
    failures = []
    applicable = {m.name for m in panel_for(obj)}
    for m in PANEL:
        value = error = math.nan
        if m.name in applicable:
            seed = seeding.derive_seed(member_hash, 0, user_seed, f"measure:{m.name}") % 2**31
            try:
                est = m.compute(obj, seed)
                value, error = float(est.value), float(est.error)
            except Exception as exc:  # one measure failing must not lose the model
                failures.append((f"{prefix}{m.name}", f"{type(exc).__name__}: {exc}"))
        row[f"{prefix}{m.name}"] = value
        row[f"{prefix}{m.name}_err"] = error
    return row, failures


def evaluate_model(task: ModelTask) -> dict[str, Any]:
    """Train one member, measure it as trained and after each rescaling; one tidy row (runs in a worker)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(limits=1):
            return _evaluate(task)
    finally:
        torch.set_num_threads(previous)


def _evaluate(task: ModelTask) -> dict[str, Any]:
    start = time.perf_counter()
    spec = _MODEL_SPEC.validate_json(task.spec_json)
    member_hash = seeding.spec_hash(json.loads(task.spec_json))
    seed = seeding.derive_seed(member_hash, 0, task.user_seed, "train")
    data_seed = seeding.derive_seed(seeding.spec_hash(task_of(spec)), 0, task.user_seed, "data")
    trained = train_model(spec, seeding.torch_generator(data_seed), seeding.torch_generator(seed))
    run = trained.run
    row: dict[str, Any] = {
        "key": task.key,
        "spec_hash": member_hash,
        "seed": seed,
        "data_seed": data_seed,
        **spec.model_dump(),
        "epochs": run.epochs,
        "converged": run.converged,
        "diverged": run.diverged,
        "last_finite_loss": run.last_finite_loss,
        **_metrics(trained, trained.model),
    }
    failures: list[tuple[str, str]] = []
    models = {"": trained.model}
    for kind in RESCALINGS:
        generator = seeding.torch_generator(seeding.derive_seed(member_hash, 0, task.user_seed, f"rescale:{kind}"))
        models[f"{kind}:"] = random_rescaling(trained.model, kind, task.rescale_max, generator)
    with torch.no_grad():
        ref = trained.model(trained.x_test)
        row["rescale_function_change"] = max(
            float((m(trained.x_test) - ref).abs().max() / ref.abs().max()) for m in models.values()
        )
    for prefix, model in models.items():
        if run.converged:  # excluded models are recorded, not measured
            values, errs = _panel(Objective(model, trained.x, trained.y), member_hash, task.user_seed, prefix)
        else:
            values, errs = _panel_nan(prefix), []
        row.update(values)
        failures += errs
    row["failed_measures"] = " ".join(column for column, _ in failures)
    row["measure_failures"] = "; ".join(f"{column}: {message}" for column, message in failures)
    row["seconds"] = time.perf_counter() - start
    return row


def _panel_nan(prefix: str) -> dict[str, float]:
    return {f"{prefix}{n}{suffix}": math.nan for n in MEASURES for suffix in ("", "_err")}


def _cache_path(ctx: ClaimContext, key: str) -> Path | None:
    return None if ctx.artifacts is None else ctx.artifacts / "benchmark" / "models" / f"{key}.json"


def _read_cached(path: Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"), parse_constant=float)
    except (OSError, ValueError):
        return None


def measure_population(population: Population, name: str, ctx: ClaimContext, *, rescale_max: float) -> list[dict]:
    """One row per member (grid order): trained, measured and cached, the missing ones in parallel."""
    tasks = [model_task(m, ctx.seed, rescale_max) for m in population.members()]
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

        bar = tqdm(total=len(todo), desc=f"benchmark {name}", unit="model", file=sys.stderr, disable=None, leave=False)
        for row in map_unordered(evaluate_model, todo, ctx.execution):
            path = _cache_path(ctx, row["key"])
            if path is not None:
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


def rescaled_tau(rows: Sequence[dict], measure: str, rescaling: str) -> tuple[float, float, int]:
    """Kendall τ with the gap of ``measure`` as trained and after ``rescaling``, over the included
    models where both values are finite (so the change is the measure's, not the sample's); and how
    many models that is."""
    rows = [r for r in included(rows) if math.isfinite(r[measure]) and math.isfinite(r[f"{rescaling}:{measure}"])]
    gap = np.array([r["gap"] for r in rows], dtype=float)
    before = scoring.kendall_tau(np.array([r[measure] for r in rows], dtype=float), gap)
    after = scoring.kendall_tau(np.array([r[f"{rescaling}:{measure}"] for r in rows], dtype=float), gap)
    return before, after, len(rows)


def measure_failures(rows: Sequence[dict]) -> dict[str, int]:
    """How many included models each measure column failed on (``<rescaling>:<name>`` kept apart)."""
    counts: dict[str, int] = {}
    for row in included(rows):
        for column in row["failed_measures"].split():
            counts[column] = counts.get(column, 0) + 1
    return counts


def included(rows: Sequence[dict]) -> list[dict]:
    """The models that met their stopping criterion."""
    return [r for r in rows if r["converged"]]


@dataclass(frozen=True)
class Scores:
    """Scores of one measure on one population (τ against the gap and the test metric, Ψ, CMI)."""

    tau: tuple[float, float, float]
    tau_test: tuple[float, float, float]
    psi: scoring.Granulated
    cmi: scoring.ConditionalMI
    models: int


def score_population(
    rows: Sequence[dict], hyperparameters: Sequence[str], column: str, rng: np.random.Generator, resamples: int
) -> Scores:
    """Scores of the measure in ``column`` over the included models (NaN values left out)."""
    rows = included(rows)
    mu = np.array([r[column] for r in rows], dtype=float)
    gap = np.array([r["gap"] for r in rows], dtype=float)
    test = np.array([r["test_error"] if math.isfinite(r["test_error"]) else r["test_loss"] for r in rows])
    hp = {h: [r[h] for r in rows] for h in hyperparameters}
    tau = scoring.bootstrap_kendall(mu, gap, rng, resamples=resamples)
    tau_test = scoring.bootstrap_kendall(mu, test, rng, resamples=resamples)
    psi = (
        scoring.granulated_kendall(mu, gap, hp, rng, resamples=resamples)
        if hp
        else scoring.Granulated(math.nan, {}, {})
    )
    cmi = scoring.conditional_mutual_information(mu, gap, hp)
    return Scores(tau, tau_test, psi, cmi, int(np.isfinite(mu).sum()))


@functools.lru_cache(maxsize=8)
def _cached_scores(key: str, rows_json: str, hyperparameters: tuple[str, ...], seed: int, resamples: int):
    rows = json.loads(rows_json, parse_constant=float)
    out = {}
    for column in MEASURES:
        rng = seeding.numpy_rng(seeding.derive_seed(key, 0, seed, f"bootstrap:{column}"))
        out[column] = score_population(rows, hyperparameters, column, rng, resamples)
    return out


def population_scores(rows: Sequence[dict], hyperparameters: Sequence[str], seed: int, resamples: int) -> dict:
    """Scores of every measure as trained, shared by the claims of one run."""
    rows_json = json.dumps(list(rows), allow_nan=True, sort_keys=True)
    # bootstrap draws follow the models (their spec hashes), not the cache keys: an edit to the code
    # retrains, but does not reshuffle the resamples
    key = seeding.spec_hash({"models": [r["spec_hash"] for r in rows]})
    return _cached_scores(key, rows_json, tuple(hyperparameters), seed, resamples)
