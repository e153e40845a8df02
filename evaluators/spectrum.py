"""Extreme eigenvalues of the loss Hessian from Hessian-vector products.

λ1 here is always the largest *algebraic* eigenvalue, correct on indefinite Hessians (PyHessian's
power iteration returns the largest-magnitude one). Lanczos (ARPACK's implicitly restarted
Lanczos through ``scipy.sparse.linalg.eigsh``) is the default; plain power iteration is kept as a
baseline. Each eigenvalue comes with its residual bound: for a unit vector v and a symmetric H,
some eigenvalue of H lies within ``‖Hv − λv‖`` of the Rayleigh quotient λ = vᵀHv.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy.sparse.linalg import ArpackNoConvergence, LinearOperator, eigsh
from threadpoolctl import threadpool_limits

from evaluators.estimate import Estimate, Stopwatch
from evaluators.objective import Objective

__all__ = [
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


class _CountingOperator(LinearOperator):
    """H (or its principal block on ``coords``) at θ, counting the products."""

    def __init__(self, obj: Objective, theta: torch.Tensor, coords: torch.Tensor | None = None):
        size = obj.num_params if coords is None else len(coords)
        super().__init__(dtype=np.float64, shape=(size, size))
        self.obj, self.theta, self.coords, self.count = obj, theta, coords, 0

    def _matvec(self, x: np.ndarray) -> np.ndarray:
        self.count += 1
        v = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float64).reshape(-1)).to(self.obj.dtype)
        if self.coords is None:
            return self.obj.hvp(v, self.theta).numpy().astype(np.float64).reshape(x.shape)
        full = torch.zeros(self.obj.num_params, dtype=self.obj.dtype)
        full[self.coords] = v
        return self.obj.hvp(full, self.theta)[self.coords].numpy().astype(np.float64).reshape(x.shape)

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
    )


def _residuals(op: _CountingOperator, values: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    hv = np.column_stack([op.matvec(vectors[:, i]) for i in range(vectors.shape[1])])
    return np.linalg.norm(hv - vectors * values[None, :], axis=0)


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
) -> Spectrum:
    """The k largest (``which="LA"``) or smallest (``"SA"``) eigenpairs of ∇²L(θ), by Lanczos.

    For ``P ≤ DENSE_MAX_PARAMS`` the dense Hessian is diagonalized instead. BLAS threads are
    pinned to one inside the solver: ARPACK's small dense work and torch's HVP threads otherwise
    oversubscribe the cores (measured 5× slower on 2 cores).

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

    Returns:
        A :class:`Spectrum` sorted from the extreme inwards (descending for LA, ascending for SA).
    """
    if which not in ("LA", "SA"):
        raise ValueError(f"which must be 'LA' or 'SA', got {which!r}")
    theta = obj.theta if theta is None else theta
    op = _CountingOperator(obj, theta, coords)
    p = op.shape[0]
    if not 1 <= k <= p:
        raise ValueError(f"k must be in [1, {p}], got {k}")
    converged = True
    with Stopwatch() as sw, threadpool_limits(limits=1, user_api="blas"):
        if p <= DENSE_MAX_PARAMS or k >= p - 1:
            h = np.column_stack([op.matvec(e) for e in np.eye(p)])
            h = (h + h.T) / 2
            vals, vecs = np.linalg.eigh(h)
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
    return Spectrum(vals, vecs, residuals, op.count, sw.seconds, converged)


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
    residual bound.
    """
    theta = obj.theta if theta is None else theta
    gen = torch.Generator().manual_seed(seed)
    with Stopwatch() as sw:
        v = torch.randn(obj.num_params, generator=gen, dtype=obj.dtype)
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
        extra={"eigenvector": v.numpy()},
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
