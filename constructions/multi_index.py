"""Multi-index data and interpolators of two-layer homogeneous nets (Vardhan, Taheri, Mazumdar 2026).

The student is ``f(x) = Σ_j a_j σ(θ_jᵀx)`` with σ = ReLU^c. Interpolators are built on fixed
inner directions, with the outer weights that make them flattest among all interpolators on those
directions (``evaluators.interpolation_bounds.min_weighted_lp``), so Υ compares feature sets.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from constructions.specs import MultiIndexSpec
from evaluators.interpolation_bounds import LpInterpolation, homogeneous_features, min_weighted_lp

__all__ = [
    "MultiIndexProblem",
    "build_multi_index",
    "Interpolator",
    "aligned_interpolator",
    "flattest_on_directions",
    "misaligned_directions",
    "random_directions",
]


def relu_power(z: np.ndarray, c: int) -> np.ndarray:
    return np.maximum(z, 0.0) ** c


@dataclass(frozen=True)
class MultiIndexProblem:
    spec: MultiIndexSpec
    x: np.ndarray  # (n, d)
    y: np.ndarray  # (n,)
    theta_star: np.ndarray  # (m*, d), orthonormal rows

    def labels(self, x: np.ndarray) -> np.ndarray:
        """Noiseless σ*(Θ* x)."""
        z = x @ self.theta_star.T
        if self.spec.link == "single_index":
            return relu_power(z[:, 0], self.spec.c)
        if self.spec.link == "sum_single_index":
            return relu_power(z, self.spec.c).mean(axis=1)
        return z[:, 0] * z[:, 1]

    def sample(self, n: int, generator: torch.Generator) -> tuple[np.ndarray, np.ndarray]:
        """n fresh (x, y) pairs, with the label noise."""
        x = torch.randn(n, self.spec.d, generator=generator, dtype=torch.float64).numpy()
        noise = torch.randn(n, generator=generator, dtype=torch.float64).numpy()
        return x, self.labels(x) + self.spec.noise * noise


def build_multi_index(spec: MultiIndexSpec, generator: torch.Generator) -> MultiIndexProblem:
    if spec.link == "product" and spec.m_star < 2:
        raise ValueError("link 'product' needs m_star ≥ 2")
    if spec.m_star > spec.d:
        raise ValueError("m_star must be ≤ d")
    g = torch.randn(spec.d, spec.m_star, generator=generator, dtype=torch.float64).numpy()
    theta_star = np.linalg.qr(g)[0].T
    x = torch.randn(spec.n, spec.d, generator=generator, dtype=torch.float64).numpy()
    problem = MultiIndexProblem(spec, x, np.zeros(spec.n), theta_star)
    noise = torch.randn(spec.n, generator=generator, dtype=torch.float64).numpy()
    return MultiIndexProblem(spec, x, problem.labels(x) + spec.noise * noise, theta_star)


@dataclass(frozen=True)
class Interpolator:
    """Inner weights (unit rows), outer weights, and Υ with its duality certificate."""

    theta: np.ndarray
    a: np.ndarray
    upsilon: float
    solution: LpInterpolation | None
    scale: float  # C_c: Υ = scale · (Σ κ_j |u_j|^p)

    def predict(self, x: np.ndarray, c: int) -> np.ndarray:
        return relu_power(x @ self.theta.T, c) @ self.a


def flattest_on_directions(problem: MultiIndexProblem, theta: np.ndarray) -> Interpolator:
    """The flattest interpolator whose inner directions are the rows of ``theta`` (normalized)."""
    c = problem.spec.c
    theta = theta / np.linalg.norm(theta, axis=1, keepdims=True)
    features, kappa, scale = homogeneous_features(theta, problem.x, c)
    sol = min_weighted_lp(features, problem.y, kappa, 2 * c / (c + 1))
    return Interpolator(theta, sol.a, scale * sol.primal, sol, scale)


def aligned_interpolator(problem: MultiIndexProblem) -> Interpolator:
    """The teacher itself (noiseless single/sum-of-single-index): neurons on Θ*, a = 1/m*."""
    if problem.spec.link == "product" or problem.spec.noise > 0:
        raise ValueError("the aligned teacher interpolates only noiseless (sum of) single-index data")
    c = problem.spec.c
    theta = problem.theta_star
    _, kappa, scale = homogeneous_features(theta, problem.x, c)
    a = np.full(len(theta), 1.0 / len(theta))
    return Interpolator(theta, a, scale * float(np.sum(kappa * np.abs(a) ** (2 * c / (c + 1)))), None, scale)


def misaligned_directions(problem: MultiIndexProblem, m: int, rho: float, generator: torch.Generator) -> np.ndarray:
    """m unit directions ``ρ θ*_1 + √(1−ρ²) v_j`` with v_j uniform on the sphere of span(Θ*)^⊥.

    Their span is misaligned with span(Θ*) by ρ* = ρ (Def. 2 of the paper); ρ = 0 gives features
    independent of the labels.
    """
    d = problem.spec.d
    g = torch.randn(m, d, generator=generator, dtype=torch.float64).numpy()
    g -= (g @ problem.theta_star.T) @ problem.theta_star
    v = g / np.linalg.norm(g, axis=1, keepdims=True)
    return rho * problem.theta_star[0][None, :] + np.sqrt(1 - rho**2) * v


def random_directions(problem: MultiIndexProblem, m: int, generator: torch.Generator) -> np.ndarray:
    """m directions uniform on the sphere (random features)."""
    g = torch.randn(m, problem.spec.d, generator=generator, dtype=torch.float64).numpy()
    return g / np.linalg.norm(g, axis=1, keepdims=True)
