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

The same estimators give the trace of the generalized Gauss–Newton matrix G (``Objective.ggn_vp``):
``gauss_newton_trace``. For the MSE loss ``Tr G = (2/n) Σ_i Σ_k ‖∇_θ f_k(x_i)‖²`` at every θ, the
gradient-norm identity above without its piecewise-linear condition (Wen et al. 2023, Lemma 4.1:
the Hessian's trace at an interpolator). Probes are drawn on the CPU from ``seed`` and moved to the
objective's device, so a seed gives the same probes on every device.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from evaluators.estimate import Estimate, Stopwatch, mean_with_stderr, precision_of
from evaluators.objective import Objective

__all__ = [
    "gauss_newton_trace",
    "hessian_trace",
    "relu_mlp_gradient_norms",
    "supports_exact_identity",
    "DENSE_TRACE_MAX_PARAMS",
]

DENSE_TRACE_MAX_PARAMS = 5000  # "exact" falls back to the dense diagonal (P products) up to this P
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
    return torch.cat([_relu_mlp_batch_gradient_norms(obj.module, params, xb) for xb, _ in obj.batches()])


def _relu_mlp_batch_gradient_norms(model: nn.Sequential, params: dict, x: torch.Tensor) -> torch.Tensor:
    x = x.reshape(x.shape[0], -1)
    tape: list[tuple[str, torch.Tensor, torch.Tensor | None]] = []
    with torch.no_grad():
        for idx, layer in enumerate(model):
            if isinstance(layer, nn.Linear):  # parameters outside θ are fixed: they add no gradient
                w_name, b_name = f"{idx}.weight", f"{idx}.bias"
                weight, bias = params.get(w_name, layer.weight), params.get(b_name, layer.bias)
                input_sq = (x**2).sum(dim=1) if w_name in params else torch.zeros_like(x[:, 0])
                tape.append(("linear", weight, input_sq + (1.0 if b_name in params else 0.0)))
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
        norms = torch.zeros(n, dtype=x.dtype, device=x.device)
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


def _exact_trace(obj: Objective, theta: torch.Tensor, product: Callable) -> tuple[float, int, str]:
    if supports_exact_identity(obj):
        return float(2.0 / obj.n * relu_mlp_gradient_norms(obj, theta).sum()), 0, "gradient-norm identity"
    p = obj.num_params
    if p > DENSE_TRACE_MAX_PARAMS:
        raise ValueError(
            f"exact trace needs P ≤ {DENSE_TRACE_MAX_PARAMS} for this model (P = {p}); use method='hutch++'"
        )
    diag = sum(float(product(_unit(obj, i), theta)[i]) for i in range(p))  # no P × P identity in memory
    return diag, p, "dense diagonal"


def _unit(obj: Objective, i: int) -> torch.Tensor:
    e = torch.zeros(obj.num_params, dtype=obj.dtype, device=obj.device)
    e[i] = 1.0
    return e


def _rademacher(obj: Objective, m: int, gen: torch.Generator) -> torch.Tensor:
    signs = torch.randint(0, 2, (m, obj.num_params), generator=gen) * 2 - 1  # on the CPU: same draws on every device
    return obj.vector(signs)


def hessian_trace(
    obj: Objective,
    *,
    method: str = "auto",
    samples: int = 100,
    seed: int = 0,
    theta: torch.Tensor | None = None,
    max_hvps: int | None = None,
) -> Estimate:
    """Tr ∇²L(θ) by the chosen method (see the module docstring for the formulas).

    Args:
        obj: the objective.
        method: ``"exact"``, ``"hutchinson"``, ``"hutch++"`` or ``"auto"``: the gradient-norm
            identity when it applies (no product), else the dense diagonal when its P products fit
            ``max_hvps``, else Hutch++ with ``samples`` products. ``extra["method"]`` says which.
        samples: Hessian-vector products for the stochastic methods (Hutch++: ≥ 6).
        seed: seeds the probe vectors.
        theta: the point (default ``obj.theta``).
        max_hvps: the most products ``"auto"`` may spend (default ``samples``).

    Returns:
        An :class:`~evaluators.estimate.Estimate`; stochastic methods give ``error_kind="stderr"``
        and a 95% Student-t ``interval``.
    """
    return _trace(obj, obj.hvp, method, samples, seed, theta, max_hvps)


def gauss_newton_trace(obj: Objective, **options) -> Estimate:
    """Tr G(θ) of the generalized Gauss–Newton matrix ``G = (1/n) Σ_i J_iᵀ ∇²_f ℓ_i J_i``.

    The same methods and keyword arguments as :func:`hessian_trace`, with products ``G v``
    (:meth:`~evaluators.objective.Objective.ggn_vp`). For MSE on a piecewise-linear MLP the
    Hessian's diagonal equals G's, so the gradient-norm identity gives Tr G exactly there.
    """
    return _trace(obj, obj.ggn_vp, **options)


def _trace(obj, product, method="auto", samples=100, seed=0, theta=None, max_hvps=None) -> Estimate:
    theta = obj.theta if theta is None else theta
    budget = samples if max_hvps is None else max_hvps
    choice = {}
    if method == "auto":
        if supports_exact_identity(obj) or obj.num_params <= min(budget, DENSE_TRACE_MAX_PARAMS):
            method = "exact"
        else:
            method = "hutch++"
            samples = min(samples, budget)
        choice = {"auto_budget": budget}
    if method not in ("exact", "hutchinson", "hutch++"):
        raise ValueError(f"method must be exact, hutchinson, hutch++ or auto, got {method!r}")
    reference = obj.float64_product(product) if obj.dtype != torch.float64 else None  # fail before estimating
    gen = torch.Generator().manual_seed(seed)
    with Stopwatch() as sw:
        if method == "exact":
            value, hvps, how = _exact_trace(obj, theta, product)
            if reference is None:
                rounding = 0.0
            else:  # the identity (or diagonal) again in float64: the round-off of the value itself
                twin = reference.__self__
                rounding = abs(value - _exact_trace(twin, twin.vector(theta), reference)[0])
        elif method == "hutchinson":
            if samples < 2:
                raise ValueError("hutchinson needs samples ≥ 2")
            z = _rademacher(obj, samples, gen)
            hz = product(z, theta)
            if reference is not None:  # accumulate the forms in float64: only the products are low precision
                z, hz = z.to(torch.float64), hz.to(torch.float64)
            quad = (z * hz).sum(dim=1)
            mean, se, ci = mean_with_stderr(quad.cpu().numpy())
            hvps, rounding = samples, _quadratic_form_rounding(reference, theta, z[:3], quad[:3])
        else:
            mean, se, ci, hvps, rounding = _hutch_plus_plus(obj, product, theta, samples, gen, reference)
    precision = precision_of(obj.dtype)
    if method == "exact":
        extra = {"method": how, **choice, **({} if reference is None else {"rounding": rounding})}
        return Estimate(value, rounding, "exact", hvps=hvps, seconds=sw.seconds, extra=extra, precision=precision)
    extra = {"method": method, **choice}
    if reference is not None:  # the stderr widened by the measured round-off, on both sides of the interval
        extra["rounding"] = rounding
        se, ci = se + rounding, (ci[0] - rounding, ci[1] + rounding)
    return Estimate(mean, se, "stderr", hvps=hvps, seconds=sw.seconds, interval=ci, extra=extra, precision=precision)


def _quadratic_form_rounding(reference, theta, vectors: torch.Tensor, forms: torch.Tensor) -> float:
    """``max_j |v_jᵀ M v_j − (v_jᵀ M v_j)₆₄|``: the round-off of the low-precision quadratic forms
    ``forms`` against the float64 ``reference`` product (0 in float64)."""
    if reference is None or len(vectors) == 0:
        return 0.0
    v64 = vectors.to(torch.float64)
    exact = (v64 * reference(v64, reference.__self__.vector(theta))).sum(dim=1)
    return float((forms.to(torch.float64) - exact).abs().max())


def _hutch_plus_plus(obj: Objective, product: Callable, theta: torch.Tensor, samples: int, gen, reference=None):
    """Hutch++ (module docstring), and in lower precision its round-off (see ``_hutch_rounding``)."""
    if samples < 6:
        raise ValueError("hutch++ needs samples ≥ 6 (a third each for sketch, projection, residual)")
    p = obj.num_params
    k = min(samples // 3, p)
    s = _rademacher(obj, k, gen)
    q, _ = torch.linalg.qr(product(s, theta).T)  # (P, k), orthonormal columns
    hq = product(q.T, theta).T
    m = samples - 2 * k
    g = _rademacher(obj, m, gen)
    g = g - (g @ q) @ q.T
    hg = product(g, theta)
    if reference is not None:  # accumulate the forms in float64: only the products are low precision
        q, hq, g, hg = (t.to(torch.float64) for t in (q, hq, g, hg))
    top = float((q * hq).sum())
    quad = (g * hg).sum(dim=1)
    if m >= 2:
        rest, se, (lo, hi) = mean_with_stderr(quad.cpu().numpy())
    else:
        rest, se, (lo, hi) = float(quad.mean()) if m else 0.0, float("inf"), (-np.inf, np.inf)
    rounding = 0.0 if reference is None else _hutch_rounding(reference, theta, q, hq, g, quad)
    return top + rest, se, (top + lo, top + hi), 2 * k + m, rounding


def _hutch_rounding(reference, theta, q, hq, g, quad, checked: int = 3) -> float:
    """Hutch++'s error from low-precision arithmetic, on top of its stderr:

    * the projector: with ``E = I − QᵀQ`` (Q orthonormal only to the working precision),
      ``Tr(QᵀHQ) + Tr((I − QQᵀ)H(I − QQᵀ)) = Tr H − Tr(E QᵀHQ)``, a bias computed here exactly;
    * the products: k times the largest round-off of ``checked`` columns' forms ``q_iᵀHq_i``
      (recomputed in float64), plus that of the first deflated probe's form: a bound that assumes
      every column errs in the same direction by as much as the worst one checked.
    """
    k = q.shape[1]
    gram = q.T @ q
    bias = abs(float(torch.trace((torch.eye(k, dtype=gram.dtype, device=gram.device) - gram) @ (q.T @ hq))))
    forms = (q[:, :checked] * hq[:, :checked]).sum(dim=0)
    return (
        bias
        + k * _quadratic_form_rounding(reference, theta, q.T[:checked], forms)
        + _quadratic_form_rounding(reference, theta, g[:1], quad[:1])
    )
