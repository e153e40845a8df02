"""Small float64 models with dense Hessian references for the evaluator tests."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from evaluators import Objective

MODEL_CASES = {
    "relu-bias-1out": dict(act="relu", bias=True, outputs=1, bn=False),
    "relu-nobias-2out": dict(act="relu", bias=False, outputs=2, bn=False),
    "relu-deep-3out": dict(act="relu", bias=True, outputs=3, bn=False, depth=2),
    "tanh-bias-1out": dict(act="tanh", bias=True, outputs=1, bn=False),
    "tanh-nobias-3out": dict(act="tanh", bias=False, outputs=3, bn=False),
    "relu-batchnorm-1out": dict(act="relu", bias=True, outputs=1, bn=True),
    "tanh-batchnorm-2out": dict(act="tanh", bias=True, outputs=2, bn=True),
}


def make_model(act="relu", bias=True, outputs=1, bn=False, depth=1, d=4, width=6, seed=0) -> nn.Sequential:
    torch.manual_seed(seed)
    layers, fan_in = [], d
    for _ in range(depth):
        layers.append(nn.Linear(fan_in, width, bias=bias))
        if bn:
            layers.append(nn.BatchNorm1d(width))
        layers.append(nn.ReLU() if act == "relu" else nn.Tanh())
        fan_in = width
    layers.append(nn.Linear(fan_in, outputs, bias=bias))
    return nn.Sequential(*layers).double()


def make_objective(case: str, n: int = 12, seed: int = 0) -> Objective:
    cfg = MODEL_CASES[case]
    model = make_model(**cfg, seed=seed)
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(n, 4, generator=g, dtype=torch.float64)
    y = torch.randn(n, cfg["outputs"], generator=g, dtype=torch.float64)
    return Objective(model, (x, y))


def reference_hessian(obj: Objective, theta: torch.Tensor | None = None) -> torch.Tensor:
    """Dense Hessian by ``torch.autograd.functional.hessian`` (plain autograd, right for BN)."""
    theta = obj.theta if theta is None else theta
    return torch.autograd.functional.hessian(lambda t: obj.loss(t), theta.clone())


@pytest.fixture(params=list(MODEL_CASES))
def case(request) -> str:
    return request.param
