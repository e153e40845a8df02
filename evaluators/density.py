"""The spectral density of the loss Hessian by stochastic Lanczos quadrature (SLQ).

For a unit probe v, m steps of Lanczos on H from v give a tridiagonal T_m = Σ_k θ_k u_k u_kᵀ, and
the Gauss quadrature ``vᵀ g(H) v ≈ Σ_k τ_k g(θ_k)`` with ``τ_k = (u_k)_1²``, exact for every
polynomial g of degree < 2m (Golub & Meurant 2010). With Rademacher probes z, ``E[zᵀ g(H) z]/P =
(1/P) Tr g(H)``, so the Gaussian-smoothed density

    φ_σ(t) = (1/P) Σ_j N(t; λ_j, σ²)  ≈  (1/q) Σ_{probes} Σ_k τ_k N(t; θ_k, σ²)

is estimated without bias up to the quadrature error, with the standard error over the q probes
at every t (Lin, Saad, Yang 2016; Ghorbani, Krishnan, Xiao 2019; PyHessian's ``density``). Lanczos
runs on the objective's device with full reorthogonalization (in the objective's precision);
only the small m × m eigenproblem goes to the CPU.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from evaluators.estimate import Stopwatch, precision_of
from evaluators.lanczos import lanczos, tridiagonal
from evaluators.objective import Objective

__all__ = ["SpectralDensity", "hessian_spectral_density", "lanczos_tridiagonal"]


@dataclass(frozen=True)
class SpectralDensity:
    """φ_σ on ``grid``, with its standard error over probes, and the quadrature behind it.

    Attributes:
        grid: the points t.
        density: φ_σ(t) (integrates to ≈ 1 over a grid that covers the spectrum).
        stderr: the standard error of ``density`` over the probes (pointwise).
        nodes: the Ritz values θ_k, one row per probe (probes × steps).
        weights: the quadrature weights τ_k, one row per probe (each row sums to 1).
        sigma: the Gaussian width.
        hvps: Hessian-vector products used.
        seconds: wall time.
        precision: the floating point type of the products.
    """

    grid: np.ndarray
    density: np.ndarray
    stderr: np.ndarray
    nodes: np.ndarray
    weights: np.ndarray
    sigma: float
    hvps: int
    seconds: float
    precision: str = "float64"


def lanczos_tridiagonal(matvec, v0: torch.Tensor, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """``(α, β)`` of the Lanczos tridiagonal from the unit-normalized ``v0``, fully reorthogonalized
    (:func:`evaluators.lanczos.lanczos`, which also says when it stops early)."""
    alpha, beta, _ = lanczos(matvec, v0, steps)
    return alpha, beta


def hessian_spectral_density(
    obj: Objective,
    *,
    probes: int = 10,
    steps: int = 40,
    sigma: float | None = None,
    grid: np.ndarray | int = 200,
    seed: int = 0,
    theta: torch.Tensor | None = None,
) -> SpectralDensity:
    """The Gaussian-smoothed spectral density of ∇²L(θ) by SLQ (see the module docstring).

    Args:
        obj: the objective.
        probes: Rademacher probes (≥ 2 for a standard error).
        steps: Lanczos steps per probe (the quadrature is exact for polynomials of degree < 2·steps).
        sigma: the Gaussian width (default: 1% of the spread of the Ritz values).
        grid: the points t, or how many, spread over the Ritz values ± 5σ.
        seed: seeds the probes (drawn on the CPU, the same on every device).
        theta: the point (default ``obj.theta``).
    """
    if probes < 1 or steps < 1:
        raise ValueError(f"probes and steps must be ≥ 1, got {probes} and {steps}")
    theta = obj.theta if theta is None else theta
    gen = torch.Generator().manual_seed(seed)
    steps = min(steps, obj.num_params)
    nodes = np.full((probes, steps), np.nan)
    weights = np.zeros((probes, steps))
    with Stopwatch() as sw:
        hvps = 0
        for i in range(probes):
            z = obj.vector(torch.randint(0, 2, (obj.num_params,), generator=gen) * 2 - 1)
            alpha, beta = lanczos_tridiagonal(lambda v: obj.hvp(v, theta), z, steps)
            hvps += len(alpha)
            ritz, vectors = np.linalg.eigh(tridiagonal(alpha, beta))
            nodes[i, : len(ritz)], weights[i, : len(ritz)] = ritz, vectors[0] ** 2
    finite = nodes[np.isfinite(nodes)]
    spread = float(finite.max() - finite.min())
    sigma = float(sigma) if sigma is not None else max(0.01 * spread, 1e-12 * max(1.0, float(np.abs(finite).max())))
    if np.isscalar(grid):
        grid = np.linspace(finite.min() - 5 * sigma, finite.max() + 5 * sigma, int(grid))
    grid = np.asarray(grid, dtype=np.float64)
    kernel = np.exp(-((grid[None, None, :] - np.nan_to_num(nodes)[:, :, None]) ** 2) / (2 * sigma**2))
    per_probe = (weights[:, :, None] * kernel).sum(axis=1) / (sigma * np.sqrt(2 * np.pi))
    stderr = per_probe.std(axis=0, ddof=1) / np.sqrt(probes) if probes > 1 else np.full_like(grid, np.inf)
    return SpectralDensity(
        grid, per_probe.mean(axis=0), stderr, nodes, weights, sigma, hvps, sw.seconds, precision_of(obj.dtype)
    )
