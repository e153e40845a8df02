"""Minimizers for the scenarios: full-batch L-BFGS in float64, GD+WD on scale-invariant weights, and
minibatch SGD (+ weight decay, + SAM) to a stopping criterion."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from constructions.divergence import check_finite
from evaluators import Objective, mse
from evaluators.sharpness import spherical_sharpness

__all__ = [
    "TrainResult",
    "train_lbfgs",
    "ScaleInvariantRun",
    "gd_weight_decay_scale_invariant",
    "SGDRun",
    "train_sgd",
    "relu_mlp_layers",
    "relu_mlp_mse_gradient",
]


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
    last_finite = float("nan")
    for t in range(steps + 1):
        loss, g = obj.loss_and_grad(theta)
        if t % log_every == 0 or t == steps:
            last_finite = check_finite(t, loss, theta, last_finite)
            w_norm = float(theta[idx].norm())
            sharp = spherical_sharpness(obj, params=params, theta=theta, seed=seed).value
            logs.append((t, loss, w_norm, lr / (shrink * w_norm**2), sharp))
        if t < steps:
            theta[idx] = shrink * theta[idx] - lr * g[idx]
    cols = [np.array(c) for c in zip(*logs, strict=True)]
    return ScaleInvariantRun(*cols)


@dataclass(frozen=True)
class SGDRun:
    """How a :func:`train_sgd` run ended: epochs used, final training loss and error, and why it stopped."""

    epochs: int
    loss: float
    error: float
    converged: bool
    diverged: bool
    last_finite_loss: float = float("nan")  # the last epoch's finite training loss before a divergence


def relu_mlp_layers(model: nn.Module) -> list[nn.Linear] | None:
    """The Linear layers of a ``Linear → ReLU → … → Linear`` Sequential, or None for any other model."""
    if not isinstance(model, nn.Sequential):
        return None
    modules = list(model)
    layers, activations = modules[0::2], modules[1::2]
    if len(layers) != len(activations) + 1:
        return None
    if not all(type(m) is nn.Linear for m in layers) or not all(type(m) is nn.ReLU for m in activations):
        return None
    return layers


def relu_mlp_mse_gradient(layers: list[nn.Linear], x: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
    """∇_θ of ``mse(f(x), y)`` for the ReLU MLP ``f`` of ``layers``, in ``model.parameters()`` order.

    Backpropagation written out, without the autograd engine: z_l = h_{l−1} W_lᵀ + b_l,
    h_l = relu(z_l); δ_L = (2/n)(f − y); ∇W_l = δ_lᵀ h_{l−1}, ∇b_l = Σ_i δ_l,i,
    δ_{l−1} = (δ_l W_l) ⊙ 1[h_{l−1} > 0]. The operations are autograd's own (``addmm``, ``mm`` on
    the same operands and transposes, ``2·diff`` times the mean's 1/n), so the result equals
    ``torch.autograd.grad`` bit for bit (tested).
    """
    with torch.no_grad():
        return _mlp_gradient(_mlp_weights(layers), x, y)


def _mlp_weights(layers: list[nn.Linear]) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]]:
    """``[(W, Wᵀ, b or None), …]``: views taken once per run, which in-place updates keep current."""
    return [(layer.weight, layer.weight.t(), layer.bias) for layer in layers]


def _mlp_activations(weights, x: torch.Tensor) -> list[torch.Tensor]:
    """``[x, h_1, …, h_{L−1}, f(x)]`` by ``nn.Linear``'s own ``addmm`` (same bits as ``model(x)``)."""
    activations = [x]
    for i, (_, weight_t, bias) in enumerate(weights):
        h = activations[-1]
        z = torch.addmm(bias, h, weight_t) if bias is not None else h.mm(weight_t)
        activations.append(torch.relu(z) if i < len(weights) - 1 else z)
    return activations


def _mlp_gradient(weights, x: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
    """:func:`relu_mlp_mse_gradient` on :func:`_mlp_weights`: at the catalogue's sizes a step is a
    few µs of arithmetic and tens of µs of per-call overhead, so every call saved counts."""
    activations = _mlp_activations(weights, x)
    out = activations[-1]
    delta = (2 * (out - y.reshape(out.shape))).mul_(1.0 / out.shape[0])  # the mean's backward, then the square's
    backwards: list[torch.Tensor] = []  # from the last layer down; reversed into parameter order
    for i in range(len(weights) - 1, -1, -1):
        weight, _, bias = weights[i]
        if bias is not None:
            backwards.append(delta.sum(0))
        backwards.append(delta.t().mm(activations[i]))
        if i > 0:
            delta = delta.mm(weight).masked_fill_(activations[i] <= 0, 0.0)
    return backwards[::-1]


def _forward_and_gradient(model: nn.Module, params: list[torch.Tensor]):
    """``(x ↦ model(x), (xb, yb) ↦ ∇ mse(model(xb), yb))``: written out for a ReLU MLP that trains
    all its parameters (1.6–2.6× faster per SGD step at the catalogue's sizes, benchmarks/sgd.py), by the module and
    autograd otherwise."""
    layers = relu_mlp_layers(model)
    if layers is None or len(params) != sum(1 + (layer.bias is not None) for layer in layers):

        def by_autograd(xb, yb):
            with torch.enable_grad():
                return torch.autograd.grad(mse(model(xb), yb), params)

        return model, by_autograd
    weights = _mlp_weights(layers)
    return (lambda x: _mlp_activations(weights, x)[-1]), (lambda xb, yb: _mlp_gradient(weights, xb, yb))


@torch.no_grad()
def train_sgd(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    lr: float,
    batch_size: int,
    weight_decay: float = 0.0,
    sam_rho: float = 0.0,
    max_epochs: int,
    target_loss: float,
    error_fn=None,
    generator: torch.Generator,
) -> SGDRun:
    """Minibatch SGD on ``L_B(θ) = (1/|B|) Σ_{i∈B} ‖f_θ(x_i) − y_i‖²``, in place, until a stopping criterion.

    One step (SAM of Foret et al. 2021 when ρ > 0, plain SGD when ρ = 0):

        ε = ρ ∇L_B(θ) / ‖∇L_B(θ)‖,   θ ← (1 − ηλ) θ − η ∇L_B(θ + ε).

    Batches are a fresh random partition of the training set each epoch (drawn from ``generator``).
    After every epoch the full training loss (and, with ``error_fn(outputs, y)``, the training
    error) is evaluated; the run stops as *converged* at the first epoch with loss ≤
    ``target_loss`` (and zero training error), as *diverged* at a non-finite loss or weight (its
    loss and error then NaN, ``last_finite_loss`` the epoch before), or after ``max_epochs``.
    """
    if y.dim() != 2:
        raise ValueError(f"targets must be (n, outputs), got shape {tuple(y.shape)}")
    params = [p for p in model.parameters() if p.requires_grad]
    forward, gradient = _forward_and_gradient(model, params)
    n = x.shape[0]
    loss, error, last_finite = float("nan"), float("nan"), float("nan")
    for epoch in range(1, max_epochs + 1):
        for idx in torch.randperm(n, generator=generator).split(batch_size):
            xb, yb = x[idx], y[idx]
            grads = gradient(xb, yb)
            if sam_rho > 0:
                norm = torch.sqrt(sum((g**2).sum() for g in grads))
                ascent = torch._foreach_div(torch._foreach_mul(grads, sam_rho), norm.clamp_min(1e-300))
                torch._foreach_add_(params, ascent)
                grads = gradient(xb, yb)
                torch._foreach_sub_(params, ascent)
            if weight_decay:
                torch._foreach_mul_(params, 1 - lr * weight_decay)
            torch._foreach_sub_(params, torch._foreach_mul(grads, lr))
        out = forward(x)
        loss = float(mse(out, y))
        if not (np.isfinite(loss) and bool(torch.cat([p.reshape(-1) for p in params]).isfinite().all())):
            return SGDRun(
                epoch, float("nan"), float("nan"), converged=False, diverged=True, last_finite_loss=last_finite
            )
        last_finite = loss
        if loss <= target_loss or epoch == max_epochs:  # the error is needed only to stop or to report
            error = float(error_fn(out, y)) if error_fn is not None else 0.0
            if loss <= target_loss and error == 0.0:
                return SGDRun(epoch, loss, error, converged=True, diverged=False, last_finite_loss=loss)
    return SGDRun(max_epochs, loss, error, converged=False, diverged=False, last_finite_loss=last_finite)
