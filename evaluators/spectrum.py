"""Extreme eigenvalues of the loss Hessian from Hessian-vector products.

λ1 here is always the largest *algebraic* eigenvalue, correct on indefinite Hessians (PyHessian's
power iteration returns the largest-magnitude one). Lanczos (ARPACK's implicitly restarted
Lanczos through ``scipy.sparse.linalg.eigsh``) is the default; plain power iteration is kept as a
baseline. Each eigenvalue comes with its residual bound: for a unit vector v and a symmetric H,
some eigenvalue of H lies within ``‖Hv − λv‖`` of the Rayleigh quotient λ = vᵀHv.

The same solvers run on the generalized Gauss–Newton matrix G (``Objective.ggn_vp``):
``gauss_newton_top_eigenvalue``. ARPACK works on CPU float64 vectors: each product crosses to the
objective's device and back at that edge, and nowhere else.

In float32 (an objective built with ``dtype=torch.float32``) the search runs in float32 and the
result is certified in float64 with one more product at the Ritz vector v on a float64 copy:
with ρ = vᵀH₆₄v and r = ‖H₆₄v − ρv‖, some eigenvalue lies within r of ρ, hence within
``r + |λ₃₂ − ρ|`` of the float32 value λ₃₂, the error reported.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from scipy.sparse.linalg import ArpackNoConvergence, LinearOperator, eigsh
from threadpoolctl import threadpool_limits

from evaluators.estimate import Estimate, Stopwatch, precision_of
from evaluators.lanczos import lanczos, tridiagonal
from evaluators.objective import Objective

__all__ = [
    "gauss_newton_top_eigenvalue",
    "hessian_top_eigenvalue",
    "hessian_spectrum",
    "hessian_extreme_eigenvalues",
    "power_iteration",
    "Spectrum",
    "DENSE_MAX_PARAMS",
]

DENSE_MAX_PARAMS = 64  # at or below this P a dense eigendecomposition is cheaper than Lanczos


@dataclass(frozen=True)
class Spectrum:
    """Top-k (or bottom-k) eigenpairs with residual bounds ``‖Hv_i − λ_i v_i‖``."""

    values: np.ndarray
    vectors: np.ndarray  # (P, k), unit columns
    residuals: np.ndarray
    hvps: int
    seconds: float
    converged: bool
    precision: str = "float64"
    solver: str = "arpack"  # or "dense", "device"


Product = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (v, θ) ↦ M(θ) v


class _CountingOperator(LinearOperator):
    """H (or G, or its principal block on ``coords``) at θ on CPU float64 vectors, counting products."""

    def __init__(
        self, obj: Objective, theta: torch.Tensor, coords: torch.Tensor | None = None, product: Product | None = None
    ):
        size = obj.num_params if coords is None else len(coords)
        super().__init__(dtype=np.float64, shape=(size, size))
        self.obj, self.theta, self.coords, self.count = obj, theta, coords, 0
        self.product = obj.hvp if product is None else product

    def _matvec(self, x: np.ndarray) -> np.ndarray:
        v = self.obj.vector(np.ascontiguousarray(x, dtype=np.float64).reshape(-1))
        return self.on_device(v).cpu().numpy().astype(np.float64).reshape(x.shape)

    def on_device(self, v: torch.Tensor) -> torch.Tensor:
        """The product with a vector of the objective's dtype and device, staying there."""
        self.count += 1
        if self.coords is None:
            return self.product(v, self.theta)
        full = torch.zeros(self.obj.num_params, dtype=self.obj.dtype, device=self.obj.device)
        full[self.coords] = v
        return self.product(full, self.theta)[self.coords]

    def _rmatvec(self, x: np.ndarray) -> np.ndarray:
        return self._matvec(x)


def extreme_estimate(spec: Spectrum, extra: dict | None = None) -> Estimate:
    """The first eigenvalue of ``spec`` as an :class:`Estimate` with its residual bound."""
    return Estimate(
        float(spec.values[0]),
        float(spec.residuals[0]),
        "residual_bound",
        hvps=spec.hvps,
        seconds=spec.seconds,
        converged=spec.converged,
        extra=extra or {},
        precision=spec.precision,
    )


def _residuals(op: _CountingOperator, values: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    hv = np.column_stack([op.matvec(vectors[:, i]) for i in range(vectors.shape[1])])
    return np.linalg.norm(hv - vectors * values[None, :], axis=0)


def _certified_in_float64(
    op: _CountingOperator, values: np.ndarray, vectors: np.ndarray, product: Product
) -> np.ndarray:
    """``r + |λ − ρ|`` per Ritz pair, with ρ and r from one float64 product each (module docstring)."""
    obj = product.__self__
    check = _CountingOperator(obj, obj.vector(op.theta), op.coords, product)
    hv = np.column_stack([check.matvec(vectors[:, i]) for i in range(vectors.shape[1])])
    op.count += check.count
    rho = np.einsum("pi,pi->i", vectors, hv)
    return np.linalg.norm(hv - vectors * rho[None, :], axis=0) + np.abs(values - rho)


def hessian_spectrum(
    obj: Objective,
    k: int = 1,
    *,
    which: str = "LA",
    theta: torch.Tensor | None = None,
    rtol: float = 1e-8,
    maxiter: int | None = None,
    seed: int = 0,
    coords: torch.Tensor | None = None,
    product: Product | None = None,
    solver: str = "auto",
) -> Spectrum:
    """The k largest (``which="LA"``) or smallest (``"SA"``) eigenpairs of ∇²L(θ), by Lanczos.

    For ``P ≤ DENSE_MAX_PARAMS`` the dense Hessian is diagonalized instead. ``solver="arpack"``
    is scipy's implicitly restarted Lanczos on CPU vectors (each product crosses to the device and
    back); ``solver="device"`` is a fully reorthogonalized Lanczos whose vectors stay on the
    objective's device (:mod:`evaluators.lanczos`, no restarts, memory ``maxiter × P``), stopped
    when every wanted Ritz pair's residual ``β_m |u_m|`` is below ``rtol·|θ|``; ``"auto"`` takes
    ARPACK on the CPU and the device solver elsewhere. Either way the residual bounds are computed
    afresh from the Ritz vectors. BLAS threads are pinned to one inside the solver: ARPACK's small
    dense work and torch's HVP threads otherwise oversubscribe the cores (measured 5× slower on
    2 cores).

    Args:
        obj: the objective.
        k: number of eigenpairs.
        which: ``"LA"`` (largest algebraic) or ``"SA"`` (smallest algebraic).
        theta: the point (default ``obj.theta``).
        rtol: ARPACK's relative tolerance on the Ritz values.
        maxiter: ARPACK restarts (default: scipy's).
        seed: seeds the Lanczos start vector.
        coords: optional index tensor; then the eigenpairs are those of the principal block
            ``H[coords][:, coords]``.
        product: the matrix, as ``(v, θ) ↦ M(θ) v`` (default ``obj.hvp``; ``obj.ggn_vp`` for G).
        solver: ``"auto"``, ``"arpack"`` or ``"device"`` (above); ``maxiter`` caps the device
            solver's steps (default ``min(P, 300)``).

    Returns:
        A :class:`Spectrum` sorted from the extreme inwards (descending for LA, ascending for SA).
    """
    if which not in ("LA", "SA"):
        raise ValueError(f"which must be 'LA' or 'SA', got {which!r}")
    if solver not in ("auto", "arpack", "device"):
        raise ValueError(f"solver must be 'auto', 'arpack' or 'device', got {solver!r}")
    if solver == "auto":
        solver = "arpack" if obj.device.type == "cpu" else "device"
    theta = obj.theta if theta is None else theta
    op = _CountingOperator(obj, theta, coords, product)
    p = op.shape[0]
    if not 1 <= k <= p:
        raise ValueError(f"k must be in [1, {p}], got {k}")
    reference = op.obj.float64_product(op.product) if obj.dtype != torch.float64 else None  # fail before solving
    converged = True
    with Stopwatch() as sw, threadpool_limits(limits=1, user_api="blas"):
        if p <= DENSE_MAX_PARAMS or k >= p - 1:
            h = np.column_stack([op.matvec(e) for e in np.eye(p)])
            h = (h + h.T) / 2
            vals, vecs = np.linalg.eigh(h)
            solver = "dense"
        elif solver == "device":
            vals, vecs, converged = _device_lanczos(op, k, which, rtol, maxiter, seed)
        else:
            v0 = np.random.default_rng(seed).standard_normal(p)
            try:
                vals, vecs = eigsh(op, k=k, which=which, tol=rtol, v0=v0, maxiter=maxiter)
            except ArpackNoConvergence as exc:  # keep what converged, flag it
                vals, vecs, converged = exc.eigenvalues, exc.eigenvectors, False
                if len(vals) == 0:
                    raise RuntimeError("Lanczos found no eigenvalue; raise maxiter") from exc
        order = np.argsort(vals)
        order = order[::-1] if which == "LA" else order
        vals, vecs = vals[order][:k], vecs[:, order][:, :k]
        vecs = vecs / np.linalg.norm(vecs, axis=0, keepdims=True)
        residuals = _residuals(op, vals, vecs)
        if reference is not None:
            residuals = _certified_in_float64(op, vals, vecs, reference)
    return Spectrum(vals, vecs, residuals, op.count, sw.seconds, converged, precision_of(obj.dtype), solver)


def _device_lanczos(op: _CountingOperator, k: int, which: str, rtol: float, maxiter: int | None, seed: int):
    """Top (LA) or bottom (SA) k Ritz pairs from one fully reorthogonalized Lanczos run on the device.

    Converged when ``β_m |(u_i)_m| ≤ rtol·|θ_i|`` for the k wanted pairs: the residual of a Ritz
    pair ``(θ_i, Q_m u_i)`` in exact arithmetic (Parlett 1998, §13.1). The start vector is
    ARPACK's (the same seed gives the same v0).
    """
    p = op.shape[0]
    steps = min(p, maxiter or 300)
    v0 = op.obj.vector(np.random.default_rng(seed).standard_normal(p))

    def wanted(alpha: np.ndarray, beta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ritz, u = np.linalg.eigh(tridiagonal(alpha, beta))
        order = np.argsort(ritz)[::-1] if which == "LA" else np.argsort(ritz)
        return ritz[order[:k]], u[:, order[:k]]

    def done(alpha: np.ndarray, beta: np.ndarray, beta_next: float) -> bool:
        if len(alpha) < k + 1:
            return False
        ritz, u = wanted(alpha, beta)
        return bool(np.all(beta_next * np.abs(u[-1]) <= rtol * np.maximum(np.abs(ritz), np.finfo(float).tiny)))

    alpha, beta, basis = lanczos(op.on_device, v0, steps, done=done)
    ritz, u = wanted(alpha, beta)
    converged = len(alpha) < steps or len(alpha) == p
    vectors = basis.T @ torch.as_tensor(u, dtype=basis.dtype, device=basis.device)
    return ritz, vectors.cpu().numpy().astype(np.float64), converged


def hessian_top_eigenvalue(
    obj: Objective,
    *,
    method: str = "lanczos",
    theta: torch.Tensor | None = None,
    rtol: float = 1e-8,
    maxiter: int | None = None,
    seed: int = 0,
) -> Estimate:
    """λ1, the largest algebraic eigenvalue of ∇²L(θ), with the residual bound as its error.

    ``method="lanczos"`` (default) uses :func:`hessian_spectrum`. ``method="power"`` is
    PyHessian's power iteration (stop when the relative change of the Rayleigh quotient is below
    ``rtol``); it converges to the largest-*magnitude* eigenvalue, which is λ1 only when
    λ1 ≥ |λ_min|, and is kept as a baseline. ``extra["lambda_min"]`` is not computed here; use
    ``hessian_spectrum(obj, which="SA")``.

    Returns:
        An :class:`~evaluators.estimate.Estimate` with ``error_kind="residual_bound"`` and
        ``extra["eigenvector"]`` (numpy, unit norm).
    """
    if method == "lanczos":
        spec = hessian_spectrum(obj, 1, theta=theta, rtol=rtol, maxiter=maxiter, seed=seed)
        return extreme_estimate(spec, {"eigenvector": spec.vectors[:, 0]})
    if method == "power":
        return power_iteration(obj, theta=theta, rtol=rtol, maxiter=maxiter or 1000, seed=seed)
    raise ValueError(f"method must be 'lanczos' or 'power', got {method!r}")


def gauss_newton_top_eigenvalue(
    obj: Objective, *, theta: torch.Tensor | None = None, rtol: float = 1e-8, maxiter: int | None = None, seed: int = 0
) -> Estimate:
    """λ1 of the generalized Gauss–Newton matrix G(θ) by Lanczos, with its residual bound.

    G ⪰ 0 for a convex loss, so λ1 is also its largest-magnitude eigenvalue; at an interpolator of
    the MSE loss G equals the Hessian (the residual term vanishes).
    """
    spec = hessian_spectrum(obj, 1, theta=theta, rtol=rtol, maxiter=maxiter, seed=seed, product=obj.ggn_vp)
    return extreme_estimate(spec, {"eigenvector": spec.vectors[:, 0]})


def power_iteration(
    obj: Objective,
    *,
    theta: torch.Tensor | None = None,
    rtol: float = 1e-3,
    maxiter: int = 100,
    seed: int = 0,
) -> Estimate:
    """Power iteration as in PyHessian: ``v ← Hv/‖Hv‖`` until ``|λ_t − λ_{t−1}| / (|λ_{t−1}| + 1e-6) < rtol``.

    Returns the Rayleigh quotient of the largest-magnitude eigenvalue (signed), with its
    residual bound (computed in the objective's precision: a baseline, not certified in float64).
    """
    theta = obj.theta if theta is None else theta
    gen = torch.Generator().manual_seed(seed)
    with Stopwatch() as sw:
        v = obj.vector(torch.randn(obj.num_params, generator=gen, dtype=obj.dtype))
        v /= v.norm()
        lam_prev, converged, hvps = None, False, 0
        hv = obj.hvp(v, theta)
        hvps += 1
        for _ in range(maxiter):
            lam = float(v @ hv)
            if lam_prev is not None and abs(lam - lam_prev) / (abs(lam_prev) + 1e-6) < rtol:
                converged = True
                break
            lam_prev = lam
            v = hv / hv.norm()
            hv = obj.hvp(v, theta)
            hvps += 1
        lam = float(v @ hv)
        residual = float((hv - lam * v).norm())
    return Estimate(
        value=lam,
        error=residual,
        error_kind="residual_bound",
        hvps=hvps,
        seconds=sw.seconds,
        converged=converged,
        extra={"eigenvector": v.cpu().numpy()},
        precision=precision_of(obj.dtype),
    )


def hessian_extreme_eigenvalues(
    obj: Objective, *, theta: torch.Tensor | None = None, rtol: float = 1e-8, seed: int = 0
) -> dict[str, Estimate]:
    """λ1 (largest algebraic), λ_min (smallest algebraic) and the largest-magnitude eigenvalue.

    On an indefinite Hessian the three differ; PyHessian's "top eigenvalue" is the last one.
    """
    top = hessian_spectrum(obj, 1, which="LA", theta=theta, rtol=rtol, seed=seed)
    bottom = hessian_spectrum(obj, 1, which="SA", theta=theta, rtol=rtol, seed=seed)
    found = {"lambda_max": extreme_estimate(top), "lambda_min": extreme_estimate(bottom)}
    found["largest_magnitude"] = max(found.values(), key=lambda e: abs(e.value))
    return found
