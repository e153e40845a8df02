"""One tidy row per population member: trained, measured as trained and after random rescalings.

Each member of a :class:`~constructions.populations.Population` is one :class:`MemberTask`: build
and train it, evaluate the measure panel (:data:`evaluators.panel.PANEL`) on the training
objective, then again after each of two random function-preserving rescalings of the hidden
neurons (incoming weights and bias ×α, outgoing ÷α: the same function for ReLU nets), with
``α = exp(u)``, ``u ~ U(−ln A, ln A)``:

* ``neuron_alpha``: an independent α_j for every hidden neuron;
* ``layer_T_alpha``: one α per hidden layer (Dinh et al. 2017's T_α), drawn per model.

Over a wide layer the i.i.d. per-neuron factors' extremes are nearly the same for every model, so
the two probe different things: the second changes a model's scale as a whole. The seeds come with
the task (the catalogue derives them from the member's spec, so a model is the same in every grid
that contains it); a row's numbers depend on this module's import closure and nothing else, which
is what the catalogue's row cache keys on.
"""

from __future__ import annotations

import math
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from pydantic import TypeAdapter
from threadpoolctl import threadpool_limits

from constructions import symmetries
from constructions.populations import ModelSpec, TrainedModel, build_member, train_model
from evaluators import Objective, mse, zero_one_error
from evaluators.panel import PANEL, panel_for

__all__ = [
    "MEASURES",
    "RESCALINGS",
    "MemberTask",
    "random_rescaling",
    "measure_member",
    "trained_member",
    "stored_member",
    "one_thread",
]

MEASURES: tuple[str, ...] = tuple(m.name for m in PANEL)
# The random rescalings, named like the symmetries of evaluators.panel.INVARIANCE; a measure's
# value after one is the column "<rescaling>:<measure>".
RESCALINGS: dict[str, str] = {
    "neuron_alpha": "an independent α_j per hidden neuron",
    "layer_T_alpha": "one α per hidden layer (Dinh's T_α)",
}
_MODEL_SPEC = TypeAdapter(ModelSpec)


@dataclass(frozen=True)
class MemberTask:
    """One model to train and measure (plain data, so it travels to loky and dask workers).

    ``seeds`` maps each stream (``data``, ``train``, ``measure:<name>``, ``rescale:<kind>``) to its
    seed; ``key`` is the catalogue's cache key,
    carried into the row so that a stored row names what it was computed for.
    """

    spec_json: str
    spec_hash: str
    seeds: dict[str, int]
    rescale_max: float
    key: str


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


@contextmanager
def one_thread():
    """torch, BLAS and OpenMP on one thread (a worker's numbers must not depend on the pool)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(limits=1):
            yield
    finally:
        torch.set_num_threads(previous)


def _generators(task: MemberTask) -> tuple[torch.Generator, torch.Generator]:
    return torch.Generator().manual_seed(task.seeds["data"]), torch.Generator().manual_seed(task.seeds["train"])


def trained_member(task: MemberTask) -> TrainedModel:
    """The member trained from its seeds (the model every row of it was measured on)."""
    return train_model(_MODEL_SPEC.validate_json(task.spec_json), *_generators(task))


def stored_member(
    task: MemberTask, weights: dict[str, torch.Tensor]
) -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    """(model, x, y) of a member from its stored trained weights: its data rebuilt from its seed,
    its net built and loaded, no training."""
    model, x, y, *_ = build_member(_MODEL_SPEC.validate_json(task.spec_json), *_generators(task))
    model.load_state_dict(weights)
    return model, x, y


def measure_member(task: MemberTask) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """Train one member, measure it as trained and after each rescaling (runs in a worker): one
    tidy row, and the trained weights (so that a new measure needs no retraining)."""
    with one_thread():
        return _measure(task)


def _measure(task: MemberTask) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    start = time.perf_counter()
    spec = _MODEL_SPEC.validate_json(task.spec_json)
    seeds = task.seeds
    trained = trained_member(task)
    run = trained.run
    row: dict[str, Any] = {
        "key": task.key,
        "spec_hash": task.spec_hash,
        "seed": seeds["train"],
        "data_seed": seeds["data"],
        **spec.model_dump(),
        "epochs": run.epochs,
        "converged": run.converged,
        "diverged": run.diverged,
        "last_finite_loss": run.last_finite_loss,
        **_metrics(trained),
    }
    failures: list[tuple[str, str]] = []
    models = {"": trained.model}
    for kind in RESCALINGS:
        generator = torch.Generator().manual_seed(seeds[f"rescale:{kind}"])
        models[f"{kind}:"] = random_rescaling(trained.model, kind, task.rescale_max, generator)
    with torch.no_grad():
        ref = trained.model(trained.x_test)
        row["rescale_function_change"] = max(
            float((m(trained.x_test) - ref).abs().max() / ref.abs().max()) for m in models.values()
        )
    for prefix, model in models.items():
        if run.converged:  # excluded models are recorded, not measured
            values, errs = _panel(Objective(model, (trained.x, trained.y)), seeds, prefix)
        else:
            values, errs = _panel_nan(prefix), []
        row.update(values)
        failures += errs
    row["failed_measures"] = " ".join(column for column, _ in failures)
    row["measure_failures"] = "; ".join(f"{column}: {message}" for column, message in failures)
    row["seconds"] = time.perf_counter() - start
    return row, {name: value.detach().clone() for name, value in trained.model.state_dict().items()}


def _metrics(trained: TrainedModel) -> dict[str, float]:
    """Losses, 0-1 errors (classifiers) and the gap; no finite error or gap from a diverged run
    (a NaN prediction is never a correct one)."""
    with torch.no_grad():
        out, out_test = trained.model(trained.x), trained.model(trained.x_test)
    train_loss, test_loss = float(mse(out, trained.y)), float(mse(out_test, trained.y_test))
    row = {"train_loss": train_loss, "test_loss": test_loss, "train_error": math.nan, "test_error": math.nan}
    if trained.classifier:
        row["train_error"] = zero_one_error(out, trained.y)
        row["test_error"] = zero_one_error(out_test, trained.y_test)
        row["gap"] = row["test_error"] - row["train_error"]  # Jiang et al.: the gap of the 0-1 error
    else:
        row["gap"] = test_loss - train_loss
    if trained.run.diverged or not (math.isfinite(train_loss) and math.isfinite(test_loss)):
        row.update(train_error=math.nan, test_error=math.nan, gap=math.nan)
    return row


def _panel(obj: Objective, seeds: dict[str, int], prefix: str) -> tuple[dict[str, float], list[tuple[str, str]]]:
    row: dict[str, float] = {}
    failures = []
    applicable = {m.name for m in panel_for(obj)}
    for m in PANEL:
        value = error = math.nan
        if m.name in applicable:
            try:
                est = m.compute(obj, seeds[f"measure:{m.name}"])
                value, error = float(est.value), float(est.error)
            except Exception as exc:  # one measure failing must not lose the model
                failures.append((f"{prefix}{m.name}", f"{type(exc).__name__}: {exc}"))
        row[f"{prefix}{m.name}"] = value
        row[f"{prefix}{m.name}_err"] = error
    return row, failures


def _panel_nan(prefix: str) -> dict[str, float]:
    return {f"{prefix}{n}{suffix}": math.nan for n in MEASURES for suffix in ("", "_err")}
