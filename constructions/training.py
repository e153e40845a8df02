"""Minimizers for the scenarios: full-batch L-BFGS in float64, and GD+WD on scale-invariant weights."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from evaluators import Objective
from evaluators.sharpness import spherical_sharpness

__all__ = ["TrainResult", "train_lbfgs", "ScaleInvariantRun", "gd_weight_decay_scale_invariant"]


@dataclass(frozen=True)
class TrainResult:
    """Final training loss, gradient norm and iterations of a run."""

    loss: float
    grad_norm: float
    iterations: int


def train_lbfgs(
    model: nn.Module,
    loss_fn,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    max_iter: int = 2000,
    tolerance_grad: float = 1e-10,
    weight_decay: float = 0.0,
) -> TrainResult:
    """Minimize ``loss_fn(model(x), y) + (λ/2)‖θ‖²`` with full-batch L-BFGS (strong Wolfe), in place."""
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.LBFGS(
        params,
        lr=1.0,
        max_iter=max_iter,
        tolerance_grad=tolerance_grad,
        tolerance_change=0.0,
        history_size=50,
        line_search_fn="strong_wolfe",
    )

    def closure():
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        if weight_decay:
            loss = loss + 0.5 * weight_decay * sum((p**2).sum() for p in params)
        loss.backward()
        return loss

    opt.step(closure)
    loss = closure()
    grad_norm = torch.cat([p.grad.reshape(-1) for p in params]).norm()
    state = opt.state[opt._params[0]]
    return TrainResult(float(loss.detach()), float(grad_norm), int(state.get("n_iter", 0)))


@dataclass(frozen=True)
class ScaleInvariantRun:
    """Logged GD+WD run on the scale-invariant parameters w of an objective."""

    steps: np.ndarray
    loss: np.ndarray
    norm: np.ndarray
    eff_lr: np.ndarray
    sharpness: np.ndarray

    @property
    def eos(self) -> np.ndarray:
        return self.eff_lr * self.sharpness


def gd_weight_decay_scale_invariant(
    obj: Objective,
    params: list[str],
    *,
    lr: float,
    weight_decay: float,
    steps: int,
    log_every: int,
    seed: int = 0,
) -> ScaleInvariantRun:
    """GD+WD on the named (scale-invariant) parameters only, the rest held fixed.

    Logs L, ‖w‖, η̃ = η/((1 − ηλ)‖w‖²) and the spherical sharpness λ1(∇²_w L(w/‖w‖)) every
    ``log_every | 1`` steps: an odd interval makes the logs alternate between the two phases of an
    Edge-of-Stability 2-cycle, so averages over logs average the cycle.
    """
    log_every |= 1
    idx = torch.cat([torch.arange(obj.num_params)[obj.param_slice(n)] for n in params])
    theta = obj.theta.clone()
    shrink = 1 - lr * weight_decay
    logs: list[tuple[int, float, float, float, float]] = []
    for t in range(steps + 1):
        loss, g = obj.loss_and_grad(theta)
        if t % log_every == 0 or t == steps:
            w_norm = float(theta[idx].norm())
            sharp = spherical_sharpness(obj, params=params, theta=theta, seed=seed).value
            logs.append((t, loss, w_norm, lr / (shrink * w_norm**2), sharp))
        if t < steps:
            theta[idx] = shrink * theta[idx] - lr * g[idx]
    cols = [np.array(c) for c in zip(*logs, strict=True)]
    return ScaleInvariantRun(*cols)
