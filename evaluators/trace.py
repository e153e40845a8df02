"""Tr ∇²L(θ): exact, Hutchinson and Hutch++.

* ``exact``: for MLPs made of ``Linear`` layers and piecewise-linear activations (ReLU,
  LeakyReLU) under the MSE loss, every diagonal entry of ∇²_θ f vanishes (f is affine in each
  single parameter on each activation region), so at every θ (off the measure-zero kinks)

      Tr ∇²L(θ) = (2/n) Σ_i Σ_k ‖∇_θ f_k(x_i)‖²

  (the identity of Wen et al. 2023, Lemma 4.1, which there needs interpolation for general
  nets). Per-sample gradient norms of a Linear layer factor as ``‖δ_i‖² (‖a_i‖² + 1[bias])``
  with δ_i the backpropagated signal at its output and a_i its input, so one forward pass and one
  backward pass per output give the trace. Any other model uses the diagonal of the dense Hessian
  (P Hessian-vector products).
* ``hutchinson``: ``Tr H ≈ (1/m) Σ_j z_jᵀ H z_j`` with Rademacher z_j (Hutchinson 1989), with
  the sample standard error.
* ``hutch++``: Meyer, Musco, Musco, Woodruff 2021. With a budget of m products: sketch
  ``Q = orth(H S)`` with m/3 Rademacher columns, ``Tr(QᵀHQ)`` exactly, and Hutchinson on the
  deflated ``(I − QQᵀ) H (I − QQᵀ)`` with the rest. The standard error is that of the deflated
  Hutchinson part (the Q part is exact given Q).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from evaluators.estimate import Estimate, Stopwatch, mean_with_stderr
from evaluators.objective import Objective

__all__ = [
    "hessian_trace",
    "relu_mlp_gradient_norms",
    "supports_exact_identity",
    "DENSE_TRACE_MAX_PARAMS",
]

DENSE_TRACE_MAX_PARAMS = 5000  # "auto" and "exact" fall back to the dense diagonal up to this P
_PIECEWISE_LINEAR = (nn.ReLU, nn.LeakyReLU, nn.Identity, nn.Flatten)


def supports_exact_identity(obj: Objective) -> bool:
    """True when ``obj`` is an MSE objective on an ``nn.Sequential`` of Linear + piecewise-linear layers."""
    model = obj.module
    return (
        obj.loss_kind == "mse"
        and isinstance(model, nn.Sequential)
        and all(isinstance(m, (nn.Linear, *_PIECEWISE_LINEAR)) for m in model)
        and any(isinstance(m, nn.Linear) for m in model)
    )


def relu_mlp_gradient_norms(obj: Objective, theta: torch.Tensor | None = None) -> torch.Tensor:
    """``Σ_k ‖∇_θ f_k(x_i)‖²`` for every training sample (shape (n,)), for a piecewise-linear MLP.

    One forward pass that keeps each Linear layer's input a and each activation's slope mask, then
    a backward sweep of the output Jacobians ``J_l = ∂f/∂z_l`` (n × k × width), with
    ``J ← J W`` through a Linear layer and ``J ← J ⊙ mask`` through an activation. Layer l adds
    ``‖J_l‖² (‖a_l‖² + 1[bias])``. No per-sample gradient is materialized and no autograd is used.
    """
    if not supports_exact_identity(obj):
        raise ValueError("relu_mlp_gradient_norms needs an nn.Sequential of Linear and ReLU-type layers")
    theta = obj.theta if theta is None else theta
    params = obj.unflatten(theta.detach())
    x = obj.inputs.reshape(obj.n, -1)
    tape: list[tuple[str, torch.Tensor, torch.Tensor | None]] = []
    with torch.no_grad():
        for idx, layer in enumerate(obj.module):
            if isinstance(layer, nn.Linear):
                weight, bias = params[f"{idx}.weight"], params.get(f"{idx}.bias")
                tape.append(("linear", weight, (x**2).sum(dim=1) + (0.0 if bias is None else 1.0)))
                x = torch.nn.functional.linear(x, weight, bias)
            elif isinstance(layer, nn.ReLU | nn.LeakyReLU):
                slope = layer.negative_slope if isinstance(layer, nn.LeakyReLU) else 0.0
                mask = torch.full_like(x, slope).masked_fill(x > 0, 1.0)
                tape.append(("mask", mask, None))
                x = layer(x)
            else:  # Identity / Flatten of already-flat features
                x = layer(x)
        n, k = x.shape
        jac = None  # ∂f/∂z as (n, k, width); None stands for the identity at the output
        norms = torch.zeros(n, dtype=obj.dtype)
        for kind, value, input_sq in reversed(tape):
            if kind == "linear":
                norms += (k if jac is None else (jac**2).sum(dim=(1, 2))) * input_sq
                # one (n·k × width) @ (width × fan_in) product instead of n small ones
                jac = value.expand(n, k, -1) if jac is None else (jac.reshape(n * k, -1) @ value).reshape(n, k, -1)
            elif jac is not None:
                jac = jac * value[:, None, :]
            else:  # an activation after the output layer: its slope scales ∂f/∂f
                jac = torch.diag_embed(value)
    return norms


def _exact_trace(obj: Objective, theta: torch.Tensor) -> tuple[float, int, str]:
    if supports_exact_identity(obj) and obj.batch_size is None:
        return (
            float(2.0 / obj.n * relu_mlp_gradient_norms(obj, theta).sum()),
            0,
            "gradient-norm identity",
        )
    p = obj.num_params
    if p > DENSE_TRACE_MAX_PARAMS:
        raise ValueError(
            f"exact trace needs P ≤ {DENSE_TRACE_MAX_PARAMS} for this model (P = {p}); use method='hutch++'"
        )
    eye = torch.eye(p, dtype=obj.dtype)
    diag = sum(float(obj.hvp(eye[i], theta)[i]) for i in range(p))
    return diag, p, "dense diagonal"


def _rademacher(p: int, m: int, gen: torch.Generator, dtype) -> torch.Tensor:
    return (torch.randint(0, 2, (m, p), generator=gen) * 2 - 1).to(dtype)


def hessian_trace(
    obj: Objective,
    *,
    method: str = "auto",
    samples: int = 100,
    seed: int = 0,
    theta: torch.Tensor | None = None,
) -> Estimate:
    """Tr ∇²L(θ) by the chosen method (see the module docstring for the formulas).

    Args:
        obj: the objective.
        method: ``"exact"``, ``"hutchinson"``, ``"hutch++"`` or ``"auto"`` (exact when the
            gradient-norm identity applies or P ≤ ``DENSE_TRACE_MAX_PARAMS``, else Hutch++).
        samples: Hessian-vector products for the stochastic methods (Hutch++: ≥ 3).
        seed: seeds the probe vectors.
        theta: the point (default ``obj.theta``).

    Returns:
        An :class:`~evaluators.estimate.Estimate`; stochastic methods give ``error_kind="stderr"``
        and a 95% Student-t ``interval``.
    """
    theta = obj.theta if theta is None else theta
    if method == "auto":
        identity = supports_exact_identity(obj) and obj.batch_size is None
        exact_ok = identity or obj.num_params <= DENSE_TRACE_MAX_PARAMS
        method = "exact" if exact_ok else "hutch++"
    p = obj.num_params
    gen = torch.Generator().manual_seed(seed)
    with Stopwatch() as sw:
        if method == "exact":
            value, hvps, how = _exact_trace(obj, theta)
        elif method == "hutchinson":
            if samples < 2:
                raise ValueError("hutchinson needs samples ≥ 2")
            z = _rademacher(p, samples, gen, obj.dtype)
            quad = (z * obj.hvp(z, theta)).sum(dim=1).numpy()
            mean, se, ci = mean_with_stderr(quad)
            hvps = samples
        elif method == "hutch++":
            mean, se, ci, hvps = _hutch_plus_plus(obj, theta, samples, gen)
        else:
            raise ValueError(f"method must be exact, hutchinson, hutch++ or auto, got {method!r}")
    if method == "exact":
        return Estimate(value, 0.0, "exact", hvps=hvps, seconds=sw.seconds, extra={"method": how})
    return Estimate(mean, se, "stderr", hvps=hvps, seconds=sw.seconds, interval=ci, extra={"method": method})


def _hutch_plus_plus(obj: Objective, theta: torch.Tensor, samples: int, gen: torch.Generator):
    if samples < 6:
        raise ValueError("hutch++ needs samples ≥ 6 (a third each for sketch, projection, residual)")
    p = obj.num_params
    k = min(samples // 3, p)
    s = _rademacher(p, k, gen, obj.dtype)
    q, _ = torch.linalg.qr(obj.hvp(s, theta).T)  # (P, k), orthonormal columns
    top = float((q * obj.hvp(q.T, theta).T).sum())
    m = samples - 2 * k
    g = _rademacher(p, m, gen, obj.dtype)
    g = g - (g @ q) @ q.T
    quad = (g * obj.hvp(g, theta)).sum(dim=1).numpy()
    if m >= 2:
        rest, se, (lo, hi) = mean_with_stderr(quad)
    else:
        rest, se, (lo, hi) = float(quad.mean()) if m else 0.0, float("inf"), (-np.inf, np.inf)
    return top + rest, se, (top + lo, top + hi), 2 * k + m
