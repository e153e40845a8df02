"""Lyu, Li, Arora 2022, Eq. (3) and Theorem 4.7 on BN linear regression: the sharpness-reduction flow.

The flow lives on Γ, the unit-norm directions of zero loss. For the BN regression of
``constructions.bn_regression`` (``z_c = X_c w``, ``r₀ = y − ȳ``), L(w) = 0 iff ``X_c w = c r₀``
with ``c > 0``, so Γ is the unit sphere of the linear subspace ``S = null((I − r̂₀r̂₀ᵀ) X_c)`` on the
side ``⟨X_c w, r₀⟩ > 0``, and its tangent space at ζ is ``S ∩ ζ^⊥``. The flow (Lyu et al., Eq. 3) is

    dζ/dτ = −2 ∇_Γ log λ1(ζ) / (4 + ‖∇_Γ log λ1(ζ)‖²),

``∇_Γ`` the gradient projected on the tangent space. At zero residual the Hessian is the
Gauss–Newton matrix ``(2/n) Jᵀ J`` with ``J = (γ/σ₁)(I − uuᵀ/n) X_c`` and ``u = r₀/γ`` fixed on Γ, so

    λ1(ζ) = 2 γ² ‖(I − uuᵀ/n) X_c‖₂² / (n σ₁(ζ)²),   σ₁(ζ) = ‖X_c ζ‖/√n,
    ∇ log λ1(ζ) = −2 X_cᵀ X_c ζ / ‖X_c ζ‖²   (on Γ).

Theorem 4.7: GD+WD started at the edge (η̃₀ = 2/λ1(ζ₀)) from a slightly perturbed ζ₀ ∈ Γ has
``‖θ_t − ζ(t η_in)‖ = O(η_in^{1/4 − o(1)})`` for ``t ≤ T/η_in``, with ``η_in = η̂λ̂`` and ``θ_t = w_t/‖w_t‖``.
"""

from __future__ import annotations

import numpy as np
import torch

from constructions.bn_regression import BNRegressionProblem
from constructions.divergence import check_finite

__all__ = [
    "centred_inputs",
    "distance_to_flow",
    "edge_initialization",
    "flow_velocity",
    "gd_weight_decay_directions",
    "manifold_point",
    "manifold_projector",
    "sharpness_on_manifold",
    "sharpness_reduction_flow",
]


def centred_inputs(problem: BNRegressionProblem) -> tuple[torch.Tensor, torch.Tensor]:
    """(X_c, r₀ = y − ȳ)."""
    x, y = problem.data.x, problem.data.y
    return x - x.mean(dim=0), y - y.mean()


def manifold_projector(problem: BNRegressionProblem) -> torch.Tensor:
    """The orthogonal projector on S = {w : X_c w ∥ r₀}, the span of Γ (d × d)."""
    xc, r0 = centred_inputs(problem)
    a = xc - torch.outer(r0, r0 @ xc) / (r0 @ r0)
    return torch.eye(xc.shape[1], dtype=xc.dtype) - torch.linalg.pinv(a) @ a


def _retract(projector: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Back onto Γ: project on S, then on the unit sphere."""
    w = projector @ w
    return w / w.norm()


def manifold_point(problem: BNRegressionProblem, projector: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """A random point of Γ: a Gaussian direction projected on S, on the side ⟨X_c ζ, r₀⟩ > 0."""
    xc, r0 = centred_inputs(problem)
    z = _retract(projector, torch.randn(xc.shape[1], generator=generator, dtype=xc.dtype))
    return z if float((xc @ z) @ r0) > 0 else -z


def sharpness_on_manifold(problem: BNRegressionProblem, z: torch.Tensor) -> float:
    """λ1(∇²L(ζ)) at ζ ∈ Γ from the Gauss–Newton closed form (module docstring)."""
    xc, r0 = centred_inputs(problem)
    n = xc.shape[0]
    u = r0 / problem.gamma
    m = xc - torch.outer(u, u @ xc) / n
    sigma1_sq = float((xc @ z).norm() ** 2) / n
    return 2 * problem.gamma**2 * float(torch.linalg.matrix_norm(m, 2)) ** 2 / (n * sigma1_sq)


def flow_velocity(xc: torch.Tensor, projector: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """dζ/dτ of Eq. (3) at ζ ∈ Γ, for the centred training inputs ``xc``."""
    gram_z = xc.T @ (xc @ z)
    grad = -2 * gram_z / (z @ gram_z)
    tangent = projector @ grad
    tangent = tangent - (tangent @ z) * z
    return -2 * tangent / (4 + tangent @ tangent)


def sharpness_reduction_flow(
    problem: BNRegressionProblem, z0: torch.Tensor, t_end: float, dtau: float
) -> tuple[np.ndarray, torch.Tensor]:
    """(τ grid, ζ(τ) rows) of Eq. (3) from ζ₀ by classical RK4 with step ``dtau``, retracted onto Γ each stage."""
    projector = manifold_projector(problem)
    xc, _ = centred_inputs(problem)  # once: the velocity runs four times a step

    def velocity(z: torch.Tensor) -> torch.Tensor:
        return flow_velocity(xc, projector, z)

    steps = int(round(t_end / dtau))
    path, z = [z0], z0
    for _ in range(steps):
        k1 = velocity(z)
        k2 = velocity(_retract(projector, z + dtau / 2 * k1))
        k3 = velocity(_retract(projector, z + dtau / 2 * k2))
        k4 = velocity(_retract(projector, z + dtau * k3))
        z = _retract(projector, z + dtau / 6 * (k1 + 2 * k2 + 2 * k3 + k4))
        path.append(z)
    return np.arange(steps + 1) * dtau, torch.stack(path)


def edge_initialization(
    problem: BNRegressionProblem, z0: torch.Tensor, lr: float, weight_decay: float, sigma: float, generator
) -> torch.Tensor:
    """Lyu et al.'s scheme before Thm 4.7: direction ζ₀ + ξ, ξ ~ N(0, σ² I/D), norm with η̃₀ = 2/λ1(ζ₀)."""
    d = z0.shape[0]
    w = z0 + sigma / d**0.5 * torch.randn(d, generator=generator, dtype=z0.dtype)
    norm_sq = lr * sharpness_on_manifold(problem, z0) / (2 * (1 - lr * weight_decay))
    return w / w.norm() * norm_sq**0.5


def gd_weight_decay_directions(
    problem: BNRegressionProblem, w0: torch.Tensor, *, lr: float, weight_decay: float, steps: int, every: int
) -> tuple[np.ndarray, torch.Tensor]:
    """GD+WD ``w ← (1 − ηλ) w − η ∇L(w)`` (closed-form gradient); the directions θ_t every ``every`` steps."""
    w, logged, thetas = w0.numpy().copy(), [], []
    shrink = 1 - lr * weight_decay
    last = float("nan")
    for t in range(steps + 1):
        if t % every == 0 or t == steps:
            current = torch.from_numpy(w)
            last = check_finite(t, float(problem.loss(current)), current, last)
            logged.append(t)
            thetas.append(current / current.norm())
        w = shrink * w - lr * problem.gradient(w)
    return np.array(logged), torch.stack(thetas)


def distance_to_flow(
    problem: BNRegressionProblem,
    z0: torch.Tensor,
    path: torch.Tensor,
    dtau: float,
    flow_time: float,
    *,
    eta_in: float,
    lr: float,
    perturbation: float,
    generator: torch.Generator,
    logs: int,
    against_start: bool = False,
) -> dict:
    """Theorem 4.7's experiment at one intrinsic rate η_in = ηλ: GD+WD from the edge initialization
    (σ = perturbation · η_in^{1/2}) for T/η_in steps, T = ``flow_time`` the horizon of the flow
    ``path`` (logged every ``dtau``), and ‖θ_t − ζ(t η_in)‖ at about ``logs`` logged steps
    (``against_start``: ‖θ_t − ζ₀‖, the distance that does not track the flow). Returns the logged
    flow times, distances and the last direction."""
    weight_decay = eta_in / lr
    w0 = edge_initialization(problem, z0, lr, weight_decay, perturbation * eta_in**0.5, generator)
    steps = int(np.floor(flow_time / eta_in + 1e-9))  # t η_in ≤ T: the flow's path covers every step
    logged, thetas = gd_weight_decay_directions(
        problem, w0, lr=lr, weight_decay=weight_decay, steps=steps, every=max(1, steps // logs)
    )
    reference = z0.expand_as(thetas) if against_start else path[np.rint(logged * eta_in / dtau).astype(int)]
    return {"tau": logged * eta_in, "distance": (thetas - reference).norm(dim=1).numpy(), "last": thetas[-1]}
