"""Small-batch vs large-batch SGD from the same start (Keskar et al. 2017, at digits size).

A pair is two digits MLPs built from the same data draw and the same initial weights, trained by
SGD with the same step size to the same stopping criterion (train loss ≤ ``target_loss``, zero
training error), one with a small batch and one with a large batch (the whole training set by
default, i.e. gradient descent). Each is then measured where Keskar et al. measure: box
ε-sharpness ``φ = 100 (max_{|y_i| ≤ ε(|θ_i|+1)} L(θ+y) − L(θ)) / (1 + L(θ))`` at their two radii,
the Hessian's top eigenvalue, and the test error; and the loss along the line between the two
solutions (their Figure 3).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from pydantic import Field

from constructions.populations import DigitsModel, TrainedModel, train_model
from constructions.specs import PositiveFloat, PositiveInt, Spec
from evaluators import Objective, epsilon_sharpness, hessian_top_eigenvalue
from evaluators.objective import mse, zero_one_error

__all__ = ["BatchPairSpec", "PairRow", "line_losses", "measure_solution", "train_pair", "train_variants"]


class BatchPairSpec(Spec):
    """The model, the two batch sizes and where the solutions are measured."""

    model: DigitsModel = DigitsModel(width=32, n_train=256, n_test=1000, lr=0.1, target_loss=0.02, max_epochs=20_000)
    small_batch: PositiveInt = 16
    large_batch: PositiveInt = Field(default=256, description="the whole training set: gradient descent")
    eps: tuple[PositiveFloat, ...] = Field(default=(1e-3, 5e-4), description="Keskar et al.'s box radii")


@dataclass(frozen=True)
class PairRow:
    """One solution's measurements."""

    epochs: int
    converged: bool
    train_loss: float
    test_error: float
    eps_sharpness: dict[float, float]
    lambda_max: float


def train_variants(
    model: DigitsModel, variants: Mapping[str, Mapping[str, Any]], data_seed: int, init_seed: int
) -> dict[str, TrainedModel]:
    """Each variant of ``model`` (fields replaced, e.g. ``{"lr": 0.2, "batch_size": 64}``) trained
    from the same data draw and the same initial weights (and the same minibatch stream's seed)."""

    def run(update: Mapping[str, Any]) -> TrainedModel:
        member = model.model_validate({**model.model_dump(), **update})
        return train_model(member, torch.Generator().manual_seed(data_seed), torch.Generator().manual_seed(init_seed))

    return {name: run(update) for name, update in variants.items()}


def train_pair(spec: BatchPairSpec, data_seed: int, init_seed: int) -> tuple[TrainedModel, TrainedModel]:
    """(small-batch, large-batch) solutions from the same data draw and the same initial weights."""
    runs = train_variants(
        spec.model,
        {"small": {"batch_size": spec.small_batch}, "large": {"batch_size": spec.large_batch}},
        data_seed,
        init_seed,
    )
    return runs["small"], runs["large"]


def measure_solution(trained: TrainedModel, eps: tuple[float, ...]) -> PairRow:
    """ε-sharpness (each radius), λ1 and the test error of one trained net, in float64."""
    obj = Objective(trained.model, (trained.x, trained.y))
    with torch.no_grad():
        test_error = zero_one_error(trained.model(trained.x_test), trained.y_test)
    return PairRow(
        epochs=trained.run.epochs,
        converged=trained.run.converged,
        train_loss=trained.run.loss,
        test_error=float(test_error),
        eps_sharpness={e: float(epsilon_sharpness(obj, e).value) for e in eps},
        lambda_max=float(hessian_top_eigenvalue(obj).value),
    )


def line_losses(
    small: TrainedModel, large: TrainedModel, ts: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Train and test loss and error at ``θ(t) = (1 − t) θ_small + t θ_large`` (Keskar et al., Figure 3)."""
    start = torch.nn.utils.parameters_to_vector(small.model.parameters()).detach()
    end = torch.nn.utils.parameters_to_vector(large.model.parameters()).detach()
    net = copy.deepcopy(small.model)
    out = np.zeros((4, len(ts)))
    with torch.no_grad():
        for i, t in enumerate(ts):
            torch.nn.utils.vector_to_parameters((1 - t) * start + t * end, net.parameters())
            train, test = net(small.x), net(small.x_test)
            out[:, i] = [
                float(mse(train, small.y)),
                float(mse(test, small.y_test)),
                zero_one_error(train, small.y),
                zero_one_error(test, small.y_test),
            ]
    return out[0], out[1], out[2], out[3]
