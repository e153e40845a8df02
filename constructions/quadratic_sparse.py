"""Sparse regression with the quadratic parametrization ``w = u⊙u − v⊙v``, trained by GD and by
label-noise SGD (HaoChen, Wei, Lee, Ma 2021; Li, Wang, Arora 2022).

With ``f(x) = xᵀ(u⊙u − v⊙v)``, ``L(u, v) = (1/n) Σ_i (f(x_i) − y_i)²`` and ``c_j = Σ_i x_ij²``,

    Tr ∇²L(u, v) = (8/n) Σ_j c_j (u_j² + v_j²)

at *every* (u, v): the residual term ``(2/n) Σ_i r_i Tr ∇²r_i`` vanishes because ∇²r_i =
diag(2x_i, −2x_i) has trace 0. At an interpolator ``u_j² + v_j² ≥ |w_j|`` with equality iff
``u_j v_j = 0``, so the smallest trace over interpolators is ``(8/n) min {Σ_j c_j |w_j| : Xw = y}``,
a weighted basis pursuit (a linear program; docs/derivations.md §8).

The trainers run R independent runs at once (rows of U and V), in float64 numpy, from
``u = v = α·1`` (w = 0): GD on L, and SGD on ``b`` samples per step whose labels are replaced by
``y_i + σ ξ`` with ``ξ = ±1`` drawn fresh each step (σ = 0: plain SGD, whose noise vanishes at an
interpolator). Both end with Gauss–Newton projection steps onto {Xw = y} from where they stopped,
so each run is measured at the interpolator nearest the point it reached.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import numpy as np
from pydantic import Field
from scipy.optimize import linprog

from constructions.specs import NonNegativeFloat, PositiveFloat, PositiveInt, Spec

__all__ = [
    "SparseRegressionSpec",
    "SparseRegression",
    "TrainResult",
    "TrainSettings",
    "MinTrace",
    "sparse_regression",
    "hessian_trace",
    "min_trace_interpolator",
    "basis_pursuit",
    "anisotropic_sparse_regression",
    "train",
    "as_module",
    "split",
]


class SparseRegressionSpec(Spec):
    """``x_i ~ N(0, I_d)``, a ``k``-sparse ``w*`` with ±1 entries, ``y = Xw*`` (no noise)."""

    n: PositiveInt = 40
    d: PositiveInt = 100
    k: PositiveInt = 5


@dataclass(frozen=True)
class SparseRegression:
    x: np.ndarray  # (n, d)
    y: np.ndarray  # (n,)
    w_star: np.ndarray  # (d,)


def sparse_regression(spec: SparseRegressionSpec, rng: np.random.Generator) -> SparseRegression:
    if spec.k > spec.d:
        raise ValueError(f"k = {spec.k} exceeds d = {spec.d}")
    x = rng.standard_normal((spec.n, spec.d))
    w_star = np.zeros(spec.d)
    support = rng.choice(spec.d, spec.k, replace=False)
    w_star[support] = rng.choice([-1.0, 1.0], spec.k)
    return SparseRegression(x, x @ w_star, w_star)


def hessian_trace(u: np.ndarray, v: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``Tr ∇²L = (8/n) Σ_j c_j (u_j² + v_j²)`` (module docstring), per run for 2-d ``u``, ``v``."""
    c = (x**2).sum(axis=0)
    return 8.0 / x.shape[0] * ((u**2 + v**2) @ c)


def split(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The (u, v) of least trace that gives ``w``: ``u = √max(w, 0)``, ``v = √max(−w, 0)``."""
    return np.sqrt(np.maximum(w, 0)), np.sqrt(np.maximum(-w, 0))


@dataclass(frozen=True)
class MinTrace:
    w: np.ndarray
    trace: float
    residual: float  # max |Xw − y| of the LP's solution


def basis_pursuit(x: np.ndarray, y: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``argmin {Σ_j weights_j |w_j| : Xw = y}`` as an LP over ``w = p − q``, ``p, q ≥ 0`` (HiGHS)."""
    d = x.shape[1]
    result = linprog(
        np.concatenate([weights, weights]),
        A_eq=np.hstack([x, -x]),
        b_eq=y,
        bounds=[(0, None)] * (2 * d),
        method="highs",
    )
    if not result.success:
        raise RuntimeError(f"the weighted basis pursuit LP failed: {result.message}")
    return result.x[:d] - result.x[d:]


def min_trace_interpolator(data: SparseRegression) -> MinTrace:
    """``argmin {Σ_j c_j |w_j| : Xw = y}``, ``c_j = Σ_i x_ij²``: the least trace over interpolators."""
    x, y = data.x, data.y
    c = (x**2).sum(axis=0)
    w = basis_pursuit(x, y, c)
    return MinTrace(w, 8.0 / x.shape[0] * float(c @ np.abs(w)), float(np.abs(x @ w - y).max()))


def anisotropic_sparse_regression(
    spec: SparseRegressionSpec, scale_ratio: float, support_on: Literal["high", "low"], rng: np.random.Generator
) -> tuple[SparseRegression, np.ndarray]:
    """Features of two scales, ``x_ij ~ N(0, s_j²)`` with ``s_j = √r`` on the first half and ``1/√r``
    on the second (``r = scale_ratio``), and the ``k``-sparse ±1 truth on the ``support_on`` half.
    Returns the data and ``s``; the population loss of ``w`` is ``Σ_j s_j² (w_j − w*_j)²``."""
    if 2 * spec.k > spec.d:
        raise ValueError(f"k = {spec.k} must fit in half of d = {spec.d}")
    half = spec.d // 2
    scales = np.where(np.arange(spec.d) < half, np.sqrt(scale_ratio), 1 / np.sqrt(scale_ratio))
    x = rng.standard_normal((spec.n, spec.d)) * scales
    pool = np.arange(half) if support_on == "high" else np.arange(half, spec.d)
    w_star = np.zeros(spec.d)
    w_star[rng.choice(pool, spec.k, replace=False)] = rng.choice([-1.0, 1.0], spec.k)
    return SparseRegression(x, x @ w_star, w_star), scales


class TrainSettings(Spec):
    """One trainer: ``steps`` of full-batch GD or of SGD (``batch_size`` samples drawn with
    replacement, labels ``y_i + σξ``), then projection onto the interpolators."""

    method: Literal["gd", "sgd"] = "gd"
    init_scale: PositiveFloat = 1.0
    lr: PositiveFloat = 1e-3
    steps: PositiveInt = 200_000
    label_noise: NonNegativeFloat = Field(default=0.0, description="SGD's σ: labels y_i + σξ, ξ = ±1 fresh each step")
    batch_size: PositiveInt = 1
    lr_decay_at: tuple[Annotated[float, Field(gt=0, lt=1)], ...] = Field(
        default=(), description="fractions of ``steps`` at which η is divided by 10 (HaoChen et al.'s schedule)"
    )
    finish_steps: PositiveInt = Field(default=50, description="Gauss–Newton projection steps at most")
    finish_tol: PositiveFloat = 1e-16
    log_points: PositiveInt = 40


@dataclass(frozen=True)
class TrainResult:
    u: np.ndarray  # (R, d) after the projection
    v: np.ndarray
    steps: np.ndarray  # logged step numbers
    trace: np.ndarray  # (len(steps), R): Tr ∇²L along training
    train_loss: np.ndarray  # (len(steps), R), on the clean labels
    final_loss: np.ndarray  # (R,) after the projection
    diverged: np.ndarray  # (R,) bool

    @property
    def w(self) -> np.ndarray:
        return self.u**2 - self.v**2


def _loss(u, v, x, y):
    return (((u**2 - v**2) @ x.T - y) ** 2).mean(axis=1)


def _step(u, v, x, y, lr):
    """One GD step on (1/b) Σ_i (x_iᵀw − y_i)² for each run (rows), x: (R, b, d), y: (R, b)."""
    r = np.einsum("rbd,rd->rb", x, u**2 - v**2) - y
    g = 2.0 / x.shape[1] * np.einsum("rb,rbd->rd", r, x)  # ∂/∂w
    return u - lr * 2 * g * u, v + lr * 2 * g * v


def _project(u, v, x, y, tol: float, steps: int):
    """Gauss–Newton steps ``(δu, δv) = −J⁺ r`` (minimum norm) onto {Xw = y}: the interpolator
    nearest the iterate, to first order; converges quadratically where GD crawls (near a sparse w
    the off-support coordinates are small and so is the loss's curvature along them)."""
    for _ in range(steps):
        r = x @ (u**2 - v**2) - y
        if np.mean(r**2) <= tol:
            break
        step = np.linalg.lstsq(np.hstack([2 * x * u, -2 * x * v]), -r, rcond=None)[0]
        u, v = u + step[: x.shape[1]], v + step[x.shape[1] :]
    return u, v


def train(data: SparseRegression, settings: TrainSettings, runs: int, rng: np.random.Generator) -> TrainResult:
    """``runs`` runs from ``u = v = α·1``; SGD's samples and label noise drawn from ``rng``."""
    x, y = data.x, data.y
    n, d = x.shape
    u = np.full((runs, d), settings.init_scale)
    v = np.full((runs, d), settings.init_scale)
    full_x, full_y = np.broadcast_to(x, (runs, n, d)), np.broadcast_to(y, (runs, n))
    log_at = set(np.unique(np.geomspace(1, settings.steps, settings.log_points).astype(int)))
    steps, traces, losses = [], [], []
    if settings.method == "gd" and settings.label_noise > 0:
        raise ValueError("label_noise applies to SGD; GD uses the clean labels")
    decays = sorted(round(f * settings.steps) for f in settings.lr_decay_at)
    for t in range(1, settings.steps + 1):
        lr = settings.lr * 0.1 ** sum(t > s for s in decays)
        if settings.method == "sgd":
            idx = rng.integers(0, n, (runs, settings.batch_size))
            noise = settings.label_noise * rng.choice([-1.0, 1.0], (runs, settings.batch_size))
            u, v = _step(u, v, x[idx], y[idx] + noise, lr)
        else:
            u, v = _step(u, v, full_x, full_y, lr)
        if t in log_at:
            steps.append(t)
            traces.append(hessian_trace(u, v, x))
            losses.append(_loss(u, v, x, y))
    diverged = ~np.isfinite(u).all(axis=1) | ~np.isfinite(v).all(axis=1)
    for r in np.flatnonzero(~diverged):
        u[r], v[r] = _project(u[r], v[r], x, y, settings.finish_tol, settings.finish_steps)
    return TrainResult(u, v, np.array(steps), np.array(traces), np.array(losses), _loss(u, v, x, y), diverged)


def as_module(u: np.ndarray, v: np.ndarray, power: int = 2):
    """``f(x) = xᵀ(u^p − v^p)`` as a torch module (float64) with parameters u, v: the dense-Hessian
    reference for :func:`hessian_trace` (p = 2; p = 1 is the linear parametrization, where it fails)."""
    import torch

    class Quadratic(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.u = torch.nn.Parameter(torch.as_tensor(u, dtype=torch.float64).clone())
            self.v = torch.nn.Parameter(torch.as_tensor(v, dtype=torch.float64).clone())

        def forward(self, x):
            return x @ (self.u**power - self.v**power)

    return Quadratic()
