"""MLPs on a synthetic regression task: Gaussian inputs, a random ReLU teacher, label noise."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from constructions.data import Dataset, gaussian_inputs
from constructions.nets import mlp
from constructions.specs import MLPRegressionSpec

__all__ = ["MLPRegressionProblem", "build_mlp_regression"]

TEACHER_WIDTH = 4


@dataclass(frozen=True)
class MLPRegressionProblem:
    data: Dataset
    model: nn.Sequential  # the student at its initialization


def build_mlp_regression(spec: MLPRegressionSpec, generator: torch.Generator) -> MLPRegressionProblem:
    """Teacher ``g`` = a random 1-hidden-layer ReLU net of width 4; ``y = g(x) + noise·ε``."""
    teacher = mlp(spec.d, (TEACHER_WIDTH,), spec.outputs, generator=generator)
    x = gaussian_inputs(spec.n, spec.d, generator)
    x_test = gaussian_inputs(spec.n_test, spec.d, generator)
    with torch.no_grad():
        y = teacher(x) + spec.noise * torch.randn(spec.n, spec.outputs, generator=generator, dtype=torch.float64)
        y_test = teacher(x_test) + spec.noise * torch.randn(
            spec.n_test, spec.outputs, generator=generator, dtype=torch.float64
        )
    student = mlp(
        spec.d,
        spec.hidden,
        spec.outputs,
        bias=spec.bias,
        activation=spec.activation,
        batchnorm=spec.batchnorm,
        layernorm=spec.layernorm,
        generator=generator,
    )
    return MLPRegressionProblem(Dataset(x, y, x_test, y_test), student)
