"""Populations of trained models for the measure benchmark: one model spec per kind, and grids of them.

A :class:`Population` is a base model spec and a grid ``{field: values}``; its members are the
Cartesian product, each a complete model spec (Jiang et al. 2020 score measures on such grids).
Three kinds of model, all trained by :func:`~constructions.training.train_sgd` on the squared loss
until train loss ≤ ``target_loss`` (and, for classifiers, zero training error). A member's data
come from a generator of its own and its initialization and minibatches from another, so that
members sharing a task (``TASK_FIELDS``) share its draws (Jiang et al. compare models on one
dataset): the digits split and noisy labels are nested in ``n_train`` and ``label_noise``, and
every multi-index member learns the same Θ*.

* ``digits``: an MLP on scikit-learn's 8×8 digits (one-hot targets, ``label_noise`` of the
  training labels redrawn);
* ``xor``: Wen, Li, Ma 2023's two-layer ReLU net on P_xor (x uniform on {−1, 1}^d, y = x1·x2),
  with or without hidden biases (no output bias), error = sign mismatch;
* ``multi_index``: a bias-free two-layer ReLU net (positively homogeneous) on Vardhan, Taheri,
  Mazumdar 2026's multi-index data (x ~ N(0, I_d), y = σ*(Θ*x) + noise), a regression task.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

import torch
from pydantic import Field, field_validator, model_validator
from torch import nn

from constructions.digits import build_digits
from constructions.multi_index import build_multi_index
from constructions.nets import mlp
from constructions.specs import (
    DigitsSpec,
    MultiIndexSpec,
    NonNegativeFloat,
    PositiveFloat,
    PositiveInt,
    Probability,
    Spec,
    XorSpec,
)
from constructions.training import SGDRun, train_sgd
from constructions.xor import build_xor
from evaluators import zero_one_error

__all__ = [
    "DigitsModel",
    "XorModel",
    "MultiIndexModel",
    "ModelSpec",
    "Population",
    "TrainedModel",
    "task_of",
    "build_member",
    "train_model",
]


class _Optimization(Spec):
    """What every member shares: SGD(+WD)(+SAM) hyperparameters and the stopping criterion."""

    lr: PositiveFloat = 0.1
    batch_size: PositiveInt = 32
    weight_decay: NonNegativeFloat = 0.0
    sam_rho: NonNegativeFloat = 0.0
    max_epochs: PositiveInt = 300
    target_loss: PositiveFloat = Field(default=0.01, description="stop at train loss ≤ this (and zero train error)")
    n_test: PositiveInt = 1000


class DigitsModel(_Optimization):
    """An MLP (``depth`` hidden layers of ``width`` ReLU units) on load_digits, MSE on one-hot targets."""

    TASK_FIELDS: ClassVar[tuple[str, ...]] = ()
    kind: Literal["digits"] = "digits"
    width: PositiveInt = 32
    depth: PositiveInt = 1
    n_train: PositiveInt = 500
    label_noise: Probability = 0.0


class XorModel(_Optimization):
    """Wen, Li, Ma 2023: ``f(x) = Σ_j W2_j relu(W1_j x + b1_j)`` on P_xor, targets ±1."""

    TASK_FIELDS: ClassVar[tuple[str, ...]] = ("d",)
    kind: Literal["xor"] = "xor"
    d: Annotated[int, Field(ge=2, le=62)] = 30
    n: PositiveInt = 100
    width: PositiveInt = 100
    bias: bool = False


class MultiIndexModel(_Optimization):
    """``f(x) = Σ_j a_j relu(θ_jᵀx)`` (no biases) on ``y = σ*(Θ* x) + noise·ε``."""

    TASK_FIELDS: ClassVar[tuple[str, ...]] = ("d", "m_star", "link")
    kind: Literal["multi_index"] = "multi_index"
    d: PositiveInt = 16
    m_star: PositiveInt = 2
    link: Literal["single_index", "sum_single_index", "product"] = "sum_single_index"
    noise: NonNegativeFloat = 0.0
    n: PositiveInt = 64
    width: PositiveInt = 32


ModelSpec = Annotated[DigitsModel | XorModel | MultiIndexModel, Field(discriminator="kind")]

GridValue = bool | int | float | str


class Population(Spec):
    """A base model and a grid: every combination of the grid's values, the other fields as in ``base``."""

    base: ModelSpec
    grid: dict[str, Annotated[tuple[GridValue, ...], Field(min_length=1)]] = Field(default_factory=dict)

    @field_validator("grid")
    @classmethod
    def _distinct_values(cls, grid: dict[str, tuple]) -> dict[str, tuple]:
        for name, values in grid.items():
            if len(set(values)) != len(values):
                raise ValueError(f"grid.{name}: values must be distinct, got {list(values)}")
        return grid

    @model_validator(mode="after")
    def _grid_fields_exist(self):
        fields = set(type(self.base).model_fields) - {"kind"}
        for name in self.grid:
            if name not in fields:
                raise ValueError(f"grid.{name}: not a field of a {self.base.kind} model; fields are {sorted(fields)}")
        self.members()  # every combination must be a valid model spec
        return self

    @property
    def hyperparameters(self) -> list[str]:
        """The grid's fields that take more than one value (the axes the scores condition on)."""
        return [name for name, values in self.grid.items() if len(values) > 1]

    def members(self) -> list[Any]:
        """Every model spec of the grid, in the grid's order (last field fastest)."""
        names = list(self.grid)
        base = self.base.model_dump()
        out = []
        for values in itertools.product(*(self.grid[n] for n in names)):
            out.append(type(self.base).model_validate({**base, **dict(zip(names, values, strict=True))}))
        return out

    def __len__(self) -> int:
        size = 1
        for values in self.grid.values():
            size *= len(values)
        return size


@dataclass(frozen=True)
class TrainedModel:
    """A trained member: the net, its training and test data (squared-loss targets), and the run."""

    model: nn.Sequential
    x: torch.Tensor
    y: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    run: SGDRun
    classifier: bool


def task_of(spec) -> dict[str, Any]:
    """What a member's data generator is seeded from: its kind and its ``TASK_FIELDS``."""
    return {"kind": spec.kind, **{name: getattr(spec, name) for name in spec.TASK_FIELDS}}


def build_member(spec, data: torch.Generator, init: torch.Generator):
    """(model, x, y, x_test, y_test, classifier) for one member: data from ``data``, weights from ``init``."""
    if spec.kind == "digits":
        problem = build_digits(
            DigitsSpec(n_train=spec.n_train, n_test=spec.n_test, hidden=(spec.width,), label_noise=spec.label_noise),
            data,
        )
        model = mlp(64, (spec.width,) * spec.depth, 10, generator=init)
        d = problem.data
        return model, d.x, d.y, d.x_test, d.y_test, True
    if spec.kind == "xor":
        xor = build_xor(XorSpec(d=spec.d, n=spec.n), data)
        x_test, y_test = xor.sample(spec.n_test, data)
        model = mlp(spec.d, (spec.width,), 1, bias=spec.bias, output_bias=False, generator=init)
        return model, xor.x, xor.y[:, None], x_test, y_test[:, None], True
    if spec.kind == "multi_index":
        problem = build_multi_index(
            MultiIndexSpec(n=spec.n, d=spec.d, m_star=spec.m_star, link=spec.link, c=1, noise=spec.noise), data
        )
        x_test, y_test = problem.sample(spec.n_test, data)
        model = mlp(spec.d, (spec.width,), 1, bias=False, generator=init)
        x, y = torch.from_numpy(problem.x), torch.from_numpy(problem.y)
        return model, x, y[:, None], x_test, y_test[:, None], False
    raise ValueError(f"unknown model kind {spec.kind!r}")


def train_model(spec, data: torch.Generator, init: torch.Generator) -> TrainedModel:
    """Build one member (data from ``data``; weights and minibatches from ``init``) and train it to
    its stopping criterion, in float64."""
    model, x, y, x_test, y_test, classifier = build_member(spec, data, init)
    run = train_sgd(
        model,
        x,
        y,
        lr=spec.lr,
        batch_size=spec.batch_size,
        weight_decay=spec.weight_decay,
        sam_rho=spec.sam_rho,
        max_epochs=spec.max_epochs,
        target_loss=spec.target_loss,
        error_fn=zero_one_error if classifier else None,
        generator=init,
    )
    return TrainedModel(model, x, y, x_test, y_test, run, classifier)
