"""Υ, the Hessian trace minimized over the rescaling symmetry of a two-layer homogeneous net.

For ``f(x) = Σ_j a_j σ(θ_jᵀx)`` with σ = ReLU^c and the MSE loss, the trace at an interpolator is
``(2/n) Σ_i ‖∇_w f(x_i)‖²``; its minimum over the per-neuron rescalings
``(a_j, θ_j) → (t_j^{−c} a_j, t_j θ_j)`` is, in closed form (Vardhan, Taheri, Mazumdar 2026,
Lemma 1; docs/derivations.md),

    Υ = C_c Σ_j κ_j |u_j|^{2c/(c+1)},   u_j = a_j ‖θ_j‖^c,   C_c = (2/n)(1 + c) c^{−c/(c+1)},

with κ_j from :func:`~evaluators.interpolation_bounds.homogeneous_features`. Away from
interpolation it is the same minimum of the Gauss–Newton part of the trace.
"""

from __future__ import annotations

import numpy as np
import torch

from evaluators.estimate import Estimate, Stopwatch, precision_of
from evaluators.interpolation_bounds import homogeneous_features
from evaluators.objective import Objective

__all__ = ["min_trace_over_rescalings", "symmetry_minimized_trace"]


def min_trace_over_rescalings(a: np.ndarray, theta: np.ndarray, x: np.ndarray, c: float) -> float:
    """Υ for outer weights ``a`` (m,), inner weights ``theta`` (m, d) and inputs ``x`` (n, d)."""
    _, kappa, const = homogeneous_features(theta, x, c)
    u = np.asarray(a, float) * np.linalg.norm(theta, axis=1) ** c
    return float(const * np.sum(kappa * np.abs(u) ** (2 * c / (c + 1))))


def symmetry_minimized_trace(
    obj: Objective,
    *,
    inner: str = "0.weight",
    outer: str = "2.weight",
    power: float = 1.0,
    theta: torch.Tensor | None = None,
) -> Estimate:
    """Υ of the objective's two-layer net at θ (closed form, so ``error_kind="exact"``).

    Args:
        obj: an objective whose model computes ``Σ_j a_j relu(θ_jᵀx)^power`` (for power 1, e.g.
            ``Linear(d, m, bias=False) → ReLU → Linear(m, 1, bias=False)``), on tensor data.
        inner: the name of the inner weights θ (m × d).
        outer: the name of the outer weights a (m, or 1 × m).
        power: c, the homogeneity of the activation.
        theta: the point (default ``obj.theta``).
    """
    params = obj.unflatten(obj.theta if theta is None else theta)
    missing = [name for name in (inner, outer) if name not in params]
    if missing:
        raise ValueError(f"symmetry_minimized_trace: no parameter {missing} in θ (known: {list(params)})")
    with Stopwatch() as sw:
        w, a = params[inner].detach().cpu().numpy(), params[outer].detach().cpu().numpy()
        value = min_trace_over_rescalings(a.reshape(-1), w, obj.inputs.cpu().numpy(), power)
    extra = {"power": power}
    return Estimate(value, 0.0, "exact", seconds=sw.seconds, extra=extra, precision=precision_of(obj.dtype))
