"""Measures built to survive reparametrization, and the plain norm baselines.

* relative flatness (Petzka et al. 2021),
* the Fisher–Rao norm (Liang et al. 2019),
* PAC-Bayes flatness, plain and magnitude-aware (Jiang et al. 2020),
* the parameter ℓ2 norm, the ℓ2 path norm and the product of spectral norms.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from evaluators.estimate import Estimate, Stopwatch, mean_with_stderr
from evaluators.objective import Objective, zero_one_error

__all__ = [
    "relative_flatness",
    "fisher_rao_norm",
    "pacbayes_flatness",
    "parameter_norm",
    "path_norm",
    "spectral_norm_product",
]


def relative_flatness(obj: Objective, layer: str, *, theta: torch.Tensor | None = None) -> Estimate:
    """Relative flatness ``κ_Tr = Σ_{s,s'} ⟨w_s, w_s'⟩ Tr(∂²L / ∂w_s ∂w_s')`` (Petzka et al. 2021).

    ``layer`` names a weight matrix W (rows w_s: the incoming weights of neuron s); ``G = W Wᵀ``.
    Invariant under any rescaling of the layer's rows that the network compensates (T_α,
    per-neuron α_s).

    When W is an ``nn.Linear``'s weight and the samples do not interact (no BatchNorm), the layer's
    pre-activations are ``z_i = W φ_i`` with φ_i independent of W, so
    ``∂²L/∂W² = Σ_i c_i (φ_i φ_iᵀ) ⊗ ∂²ℓ_i/∂z²`` (c_i the sample's weight in L) and
    ``κ_Tr = Tr(A G)`` with ``A = Σ_i c_i ‖φ_i‖² ∂²ℓ_i/∂z²``: the Hessian of L in a shift
    ``z_i → z_i + ‖φ_i‖ δ`` at δ = 0, one product per neuron (rows). Otherwise, with ``H_kk`` the
    Hessian block of column k, ``κ_Tr = Σ_{j,k} v_jkᵀ H v_jk`` where ``v_jk`` holds W[:, j] in
    column k: (in_features)² exact quadratic forms.
    """
    theta = (obj.theta if theta is None else theta).detach()
    sl = obj.param_slice(layer)
    shape = obj.layout.shapes[obj.layout.names.index(layer)]
    if len(shape) != 2:
        raise ValueError(f"relative_flatness needs a 2-d weight matrix, {layer!r} has shape {tuple(shape)}")
    w = theta[sl].view(shape)
    with Stopwatch() as sw:
        module = obj.module.get_submodule(layer.rpartition(".")[0])
        if layer.endswith("weight") and isinstance(module, nn.Linear) and not _couples_samples(obj.module):
            value, hvps = _relative_flatness_by_layer_input(obj, theta, module, w), shape[0]
        else:
            value, hvps = _relative_flatness_by_columns(obj, theta, sl, w), shape[1] ** 2
    return Estimate(value, 0.0, "exact", hvps=hvps, seconds=sw.seconds, extra={"layer": layer})


def _couples_samples(module: nn.Module) -> bool:
    return any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in module.modules())


def _relative_flatness_by_layer_input(obj: Objective, theta: torch.Tensor, layer: nn.Linear, w: torch.Tensor) -> float:
    """``Tr(A G)`` with A the Hessian of L in the shift ``z_i → z_i + ‖φ_i‖ δ`` (see above)."""
    delta = torch.zeros(w.shape[0], dtype=obj.dtype, requires_grad=True)

    def shift(_module, inputs, output):
        return output + inputs[0].norm(dim=-1, keepdim=True) * delta

    handle = layer.register_forward_hook(shift)
    try:
        (g,) = torch.autograd.grad(obj.loss(theta), delta, create_graph=True)
        eye = torch.eye(delta.numel(), dtype=obj.dtype)
        (a,) = torch.autograd.grad(g, delta, eye, is_grads_batched=True)
    finally:
        handle.remove()
    return float((a * (w @ w.T)).sum())


def _relative_flatness_by_columns(obj: Objective, theta: torch.Tensor, sl: slice, w: torch.Tensor) -> float:
    """``Σ_{j,k} v_jkᵀ H v_jk``, one batch of probes per column of W (memory: cols × P)."""
    rows, cols = w.shape
    value = 0.0
    for j in range(cols):
        probes = torch.zeros(cols, obj.num_params, dtype=obj.dtype)
        for k in range(cols):
            v = torch.zeros(rows, cols, dtype=obj.dtype)
            v[:, k] = w[:, j]
            probes[k, sl] = v.reshape(-1)
        value += float((probes * obj.hvp(probes, theta)).sum())
    return value


def _directional_derivatives(obj: Objective, theta: torch.Tensor, direction: torch.Tensor) -> torch.Tensor:
    """``⟨∇_θ ℓ_i(θ), d⟩`` for every sample, by the double-vjp trick (right through BatchNorm)."""
    leaf = theta.detach().clone().requires_grad_(True)
    losses = obj.per_sample_losses(leaf)
    dummy = torch.zeros_like(losses, requires_grad=True)
    (g,) = torch.autograd.grad(losses, leaf, dummy, create_graph=True)
    (jd,) = torch.autograd.grad(g, dummy, direction)
    return jd.detach()


def fisher_rao_norm(obj: Objective, *, theta: torch.Tensor | None = None) -> Estimate:
    """Empirical Fisher–Rao norm ``(1/n) Σ_i ⟨θ, ∇_θ ℓ(f_θ(x_i), y_i)⟩²`` (Liang et al. 2019).

    Under a function-preserving diagonal reparametrization θ' = Dθ, ``∇_θ' ℓ = D⁻¹ ∇_θ ℓ``, so
    every term is unchanged: the measure is invariant to T_α and per-neuron rescaling.
    """
    theta = (obj.theta if theta is None else theta).detach()
    with Stopwatch() as sw:
        d = _directional_derivatives(obj, theta, theta)
        value = float((d**2).mean())
    return Estimate(value, 0.0, "exact", hvps=1, seconds=sw.seconds)


def pacbayes_flatness(
    obj: Objective,
    *,
    magnitude_aware: bool = False,
    target: float = 0.1,
    metric: str = "error",
    eps: float = 1e-3,
    samples: int = 32,
    sigma_max: float = 10.0,
    iterations: int = 30,
    seed: int = 0,
    theta: torch.Tensor | None = None,
) -> Estimate:
    """PAC-Bayes flatness 1/σ² (Jiang et al. 2020, measures "pacbayes.sharpness" and "mag.flatness").

    σ is the largest noise scale whose mean increase of the training ``metric`` ("error": 0-1
    error; "loss": the objective's loss) stays ≤ ``target``, with weight noise
    ``N(0, σ²)`` (plain) or ``N(0, σ² θ_i² + ε²)`` (magnitude-aware). It is found by bisection
    on log σ in [e^{-30} σ_max, σ_max] with ``samples`` fixed noise draws (common random numbers;
    the loss deviation is then monotone in σ near a minimum, the 0-1 deviation need not be, so the
    bisection finds *a* crossing). ``interval`` brackets 1/σ² for those draws; when the target is
    not crossed inside the search range, the interval is one-sided ((0, 1/σ_max²] or
    [1/σ_min², ∞)) and ``converged`` is False. ``extra`` holds σ and the deviation at σ with its
    standard error over the draws.
    """
    if metric not in ("error", "loss"):
        raise ValueError(f"metric must be 'error' or 'loss', got {metric!r}")
    theta = (obj.theta if theta is None else theta).detach()
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(samples, obj.num_params, generator=gen, dtype=obj.dtype)
    magnitude = theta.abs()

    def measure(t: torch.Tensor) -> float:
        with torch.no_grad():
            if metric == "loss":
                return float(obj.loss(t))
            return zero_one_error(obj.forward(t), obj.targets)

    base = measure(theta)

    def deviations(sigma: float) -> np.ndarray:
        if magnitude_aware:
            std = torch.sqrt(sigma**2 * magnitude**2 + eps**2)
        else:
            std = torch.full_like(theta, sigma)
        return np.array([measure(theta + std * zi) for zi in z]) - base

    sigma_min = sigma_max * np.exp(-30.0)
    with Stopwatch() as sw:
        converged = True
        if deviations(sigma_max).mean() <= target:  # not crossed: only 1/σ² ≤ 1/σ_max² is known
            lo = hi = sigma_max
            bracket, converged = (0.0, 1.0 / sigma_max**2), False
        elif deviations(sigma_min).mean() > target:  # crossed below the range: 1/σ² ≥ 1/σ_min²
            lo = hi = sigma_min
            bracket, converged = (1.0 / sigma_min**2, float("inf")), False
        else:
            lo_log, hi_log = np.log(sigma_min), np.log(sigma_max)
            for _ in range(iterations):
                mid = (lo_log + hi_log) / 2
                if deviations(float(np.exp(mid))).mean() <= target:
                    lo_log = mid
                else:
                    hi_log = mid
            lo, hi = float(np.exp(lo_log)), float(np.exp(hi_log))
            bracket = (1.0 / hi**2, 1.0 / lo**2)
        dev_mean, dev_se, _ = mean_with_stderr(deviations(lo))
    value = 1.0 / lo**2
    return Estimate(
        value,
        (bracket[1] - bracket[0]) / 2,
        "bracket",
        hvps=samples * (iterations + 3),
        seconds=sw.seconds,
        converged=converged,
        interval=bracket,
        extra={"sigma": lo, "deviation": dev_mean, "deviation_stderr": dev_se, "metric": metric},
    )


def parameter_norm(obj: Objective, *, theta: torch.Tensor | None = None) -> Estimate:
    """‖θ‖₂ (a baseline)."""
    theta = obj.theta if theta is None else theta
    return Estimate(float(theta.norm()), 0.0, "exact")


def _linear_weights(obj: Objective, theta: torch.Tensor) -> list[tuple[torch.Tensor, bool]]:
    model = obj.module
    if not isinstance(model, nn.Sequential):
        raise ValueError("path and spectral norms need an nn.Sequential MLP")
    params = obj.unflatten(theta.detach())
    return [
        (params[f"{i}.weight"], f"{i}.bias" in params) for i, layer in enumerate(model) if isinstance(layer, nn.Linear)
    ]


def path_norm(obj: Objective, *, theta: torch.Tensor | None = None) -> Estimate:
    """ℓ2 path norm ``sqrt(Σ_paths Π_l w_l²)`` over input→output paths of the weight matrices.

    Equal to ``sqrt(1ᵀ W_L^{∘2} ⋯ W_1^{∘2} 1)``. Biases are not paths from an input and are left
    out (``extra["ignores_biases"]`` says when the net has some).
    """
    theta = obj.theta if theta is None else theta
    layers = _linear_weights(obj, theta)
    v = torch.ones(layers[0][0].shape[1], dtype=obj.dtype)
    for w, _ in layers:
        v = (w**2) @ v
    return Estimate(float(v.sum().sqrt()), 0.0, "exact", extra={"ignores_biases": any(b for _, b in layers)})


def spectral_norm_product(obj: Objective, *, theta: torch.Tensor | None = None) -> Estimate:
    """``Π_l ‖W_l‖₂`` over the Linear layers (a baseline)."""
    theta = obj.theta if theta is None else theta
    value = 1.0
    for w, _ in _linear_weights(obj, theta):
        value *= float(torch.linalg.matrix_norm(w, ord=2))
    return Estimate(value, 0.0, "exact")
