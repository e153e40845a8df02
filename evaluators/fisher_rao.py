"""The empirical Fisher–Rao norm (Liang et al. 2019), invariant under diagonal reparametrizations."""

from __future__ import annotations

import torch

from evaluators.estimate import Estimate, Stopwatch, precision_of
from evaluators.objective import Objective

__all__ = ["fisher_rao_norm"]


def _directional_derivatives(obj: Objective, theta: torch.Tensor, direction: torch.Tensor) -> torch.Tensor:
    """``⟨∇_θ ℓ_i(θ), d⟩`` for every sample, by the double-vjp trick (right through BatchNorm),
    one batch at a time."""
    leaf = theta.detach().clone().requires_grad_(True)
    parts = []
    for losses in obj.per_batch_losses(leaf):
        dummy = torch.zeros_like(losses, requires_grad=True)
        (g,) = torch.autograd.grad(losses, leaf, dummy, create_graph=True)
        parts.append(torch.autograd.grad(g, dummy, direction)[0].detach())
    return torch.cat(parts)


def fisher_rao_norm(obj: Objective, *, theta: torch.Tensor | None = None) -> Estimate:
    """Empirical Fisher–Rao norm ``(1/n) Σ_i ⟨θ, ∇_θ ℓ(f_θ(x_i), y_i)⟩²`` (Liang et al. 2019).

    Under a function-preserving diagonal reparametrization θ' = Dθ, ``∇_θ' ℓ = D⁻¹ ∇_θ ℓ``, so
    every term is unchanged: the measure is invariant to T_α and per-neuron rescaling.
    """
    theta = (obj.theta if theta is None else theta).detach()
    with Stopwatch() as sw:
        d = _directional_derivatives(obj, theta, theta)
        value = float((d**2).mean())
    return Estimate(value, 0.0, "exact", hvps=1, seconds=sw.seconds, precision=precision_of(obj.dtype))
