"""A search for interpolators flatter than a stated lower bound (Wen, Li, Ma 2023, Thm 4.1 and 5.1).

At an interpolator ``Tr ∇²L = (2/n) Σ_i ‖∇_θ f(x_i)‖²`` (docs/derivations.md §1). For a two-layer
net ``f(x) = aᵀφ(x; W, b)`` (φ = relu(Wx + b), optionally Sim-LN normalized) the output weights
enter linearly: ``∇_a f(x_i) = φ_i`` and ``∇_{W,b} f(x_i) = J_i a`` with ``J_i`` the Jacobian of
``φ_i`` in the hidden parameters, so

    T(a; W, b) = (2/n) Σ_i (‖φ_i‖² + aᵀ J_iᵀ J_i a).

For fixed hidden weights, the flattest interpolating output layer solves the equality-constrained
quadratic program ``min_a aᵀ M a  s.t.  Φ a = y`` with ``M = Σ_i J_iᵀ J_i`` (its KKT system). The
search minimizes ``T*(W, b) = T(a*(W, b); W, b)`` over the hidden weights by gradient descent
(through the KKT solve) from many starts, so every iterate interpolates exactly (when Φ has full
row rank: width ≥ n) and the smallest value found is an upper bound on the infimum of the trace
over interpolators of that width: a value below a claimed lower bound refutes the bound.
:func:`search_without_interpolation` is the control: the same descent on ``T`` alone (no
constraint) must go below any positive bound.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = [
    "TraceSearch",
    "feature_gram",
    "flattest_output_layer",
    "search_flattest_interpolator",
    "search_without_interpolation",
]


@dataclass(frozen=True)
class TraceSearch:
    """The smallest trace found, where, and how the starts went."""

    smallest_trace: float
    residual: float  # training MSE at the smallest: ≤ 1e-20 means exact interpolation up to round-off
    starts: int
    trace_per_start: list[float]
    w: torch.Tensor
    b: torch.Tensor
    a: torch.Tensor


def _features(w: torch.Tensor, b: torch.Tensor, x: torch.Tensor, simln_eps: float | None) -> torch.Tensor:
    h = torch.relu(x @ w.T + b)
    if simln_eps is not None:
        h = h / torch.clamp(h.norm(dim=-1, keepdim=True), min=simln_eps)
    return h


def _feature_jacobians(w, b, x, simln_eps):
    """Φ (n, m) and J (n, P_hidden, m): per-sample Jacobians of φ in (W, b), kept in the autograd graph."""
    phi = _features(w, b, x, simln_eps)
    per_sample = torch.func.jacrev(lambda wi, bi, xi: _features(wi, bi, xi[None], simln_eps)[0], argnums=(0, 1))
    jac_w, jac_b = torch.func.vmap(per_sample, in_dims=(None, None, 0))(w, b, x)  # (n, m, m, d), (n, m, m)
    n, m = phi.shape
    jac = torch.cat([jac_w.reshape(n, m, -1), jac_b.reshape(n, m, -1)], dim=2).transpose(1, 2)
    return phi, jac


def feature_gram(w, b, x, simln_eps: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Φ (n, m) and ``M = Σ_i J_iᵀ J_i`` (m, m), in closed form. Neuron j's parameters enter only
    through h_j = relu(z_j), z_j = w_jᵀx + b_j, so ``∂φ/∂(w_j, b_j) = G[:, j] (x, 1)ᵀ`` with
    ``G = (∂φ/∂h) diag(1[z > 0])`` and ``M = Σ_i (‖x_i‖² + 1) G_i G_iᵀ``. Without Sim-LN ∂φ/∂h = I,
    so M = diag(Σ_i 1[z_ij > 0] (‖x_i‖² + 1)); with Sim-LN φ = h/s, s = max(‖h‖, ϵ), and
    ∂φ/∂h = I/s − [‖h‖ > ϵ] h hᵀ/s³. (Tested against per-sample Jacobians.)"""
    z = x @ w.T + b
    h, active = torch.relu(z), (z > 0).to(x.dtype)
    lifted = x.pow(2).sum(1) + 1
    if simln_eps is None:
        return h, torch.diag(active.T @ lifted)
    norm = h.norm(dim=1)
    s = torch.clamp(norm, min=simln_eps)
    outer = (
        torch.where(norm > simln_eps, 1.0, 0.0)[:, None, None] * h[:, :, None] * h[:, None, :] / s[:, None, None] ** 3
    )
    dphi = torch.eye(h.shape[1], dtype=x.dtype) / s[:, None, None] - outer
    g = dphi * active[:, None, :]
    return h / s[:, None], torch.einsum("ikj,ilj,i->kl", g, g, lifted)


def flattest_output_layer(w, b, x, y, simln_eps: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(a*, T(a*))``: the interpolating output layer of least trace for hidden weights (W, b)."""
    phi, gram = feature_gram(w, b, x, simln_eps)
    n, m = phi.shape
    # a tiny ridge pins the output weight of a neuron that is dead on every sample (a zero row and
    # column of M) to 0; it moves the trace by O(1e-12 ‖a‖²)
    ridge = 1e-12 * torch.eye(m, dtype=x.dtype)
    kkt = torch.cat(
        [
            torch.cat([2 * (gram + ridge), phi.T], dim=1),
            torch.cat([phi, torch.zeros(n, n, dtype=x.dtype)], dim=1),
        ],
        dim=0,
    )
    rhs = torch.cat([torch.zeros(m, dtype=x.dtype), y])
    a = torch.linalg.solve(kkt, rhs)[:m]
    trace = 2.0 / n * ((phi**2).sum() + a @ gram @ a)
    return a, trace


def _descend(objective, params, steps: int, lr: float) -> None:
    opt = torch.optim.Adam(params, lr=lr)
    for _ in range(steps):
        opt.zero_grad()
        try:
            value = objective(*params)
        except torch.linalg.LinAlgError:  # the features lost full row rank: keep the last iterate
            break
        if not torch.isfinite(value):
            break
        value.backward()
        opt.step()


def search_flattest_interpolator(
    x: torch.Tensor,
    y: torch.Tensor,
    width: int,
    *,
    starts: list[tuple[torch.Tensor, torch.Tensor]] | None = None,
    random_starts: int = 20,
    generator: torch.Generator,
    simln_eps: float | None = None,
    steps: int = 300,
    lr: float = 0.02,
) -> TraceSearch:
    """Minimize the trace over interpolators of a two-layer (bias, optionally Sim-LN) ReLU net.

    Args:
        x, y: training inputs (n, d) and targets (n,), float64.
        width: hidden units (≥ n, so that the output layer can interpolate for generic W, b).
        starts: given hidden layers (W, b) to start from (e.g. perturbed constructions), besides
            ``random_starts`` Gaussian ones (W ~ N(0, 1/d), b ~ N(0, 1)).
        generator: draws the random starts.
        simln_eps: ϵ of the simplified LayerNorm, or None for the plain bias net.
        steps, lr: Adam steps and step size per start.
    """
    n, d = x.shape
    inits = list(starts or [])
    for _ in range(random_starts):
        w0 = torch.randn(width, d, generator=generator, dtype=x.dtype) / d**0.5
        inits.append((w0, torch.randn(width, generator=generator, dtype=x.dtype)))
    found = []  # (trace, residual, w, b, a) per start; a start that lost interpolation counts as +∞
    for w0, b0 in inits:
        w, b = w0.clone().requires_grad_(True), b0.clone().requires_grad_(True)
        _descend(lambda wi, bi: flattest_output_layer(wi, bi, x, y, simln_eps)[1], [w, b], steps, lr)
        try:
            with torch.no_grad():
                a, trace = flattest_output_layer(w, b, x, y, simln_eps)
                residual = float(((_features(w, b, x, simln_eps) @ a - y) ** 2).mean())
        except torch.linalg.LinAlgError:
            a, trace, residual = torch.zeros(width, dtype=x.dtype), torch.tensor(float("inf")), float("inf")
        value = float(trace) if residual <= 1e-20 else float("inf")
        found.append((value, residual, w.detach(), b.detach(), a))
    smallest, residual, w, b, a = min(found, key=lambda start: start[0])  # the first of equal ones, as before
    return TraceSearch(smallest, residual, len(inits), [start[0] for start in found], w, b, a)


def search_without_interpolation(
    x: torch.Tensor,
    y: torch.Tensor,
    width: int,
    *,
    generator: torch.Generator,
    simln_eps: float | None = None,
    steps: int = 300,
    lr: float = 0.02,
    init_scale: float = 1.0,
) -> float:
    """The control: the same descent on ``T(a; W, b)`` over all weights with no interpolation
    constraint (the trace of the Gauss–Newton matrix anywhere), from Gaussian weights times
    ``init_scale``; its final value. (Sim-LN's normalized features have ‖φ‖ = 1 and no gradient in
    the scale of W while ‖Wx + b‖ ≥ ϵ: a small start is inside the region where it can shrink.)"""
    n, d = x.shape
    w = (init_scale * torch.randn(width, d, generator=generator, dtype=x.dtype) / d**0.5).requires_grad_(True)
    b = (init_scale * torch.randn(width, generator=generator, dtype=x.dtype)).requires_grad_(True)
    a = (init_scale * torch.randn(width, generator=generator, dtype=x.dtype)).requires_grad_(True)

    def trace(wi, bi, ai):
        phi, gram = feature_gram(wi, bi, x, simln_eps)
        return 2.0 / n * ((phi**2).sum() + ai @ gram @ ai)

    _descend(trace, [w, b, a], steps, lr)
    with torch.no_grad():
        return float(trace(w, b, a))
