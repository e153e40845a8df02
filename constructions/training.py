"""Minimizers for the scenarios: full-batch L-BFGS in float64 (to a tight minimum)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

__all__ = ["TrainResult", "train_lbfgs"]


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
        params, lr=1.0, max_iter=max_iter, tolerance_grad=tolerance_grad, tolerance_change=0.0,
        history_size=50, line_search_fn="strong_wolfe",
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
