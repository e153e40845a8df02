"""Flattest interpolators of two-layer homogeneous nets via convex duality.

For ``f(x) = Σ_j a_j σ(θ_jᵀx)`` with σ positively c-homogeneous (ReLU^c), at an interpolator

    Tr ∇²F_S = (2/n) Σ_j [‖θ_j‖^{2c} A_j + a_j² ‖θ_j‖^{2c−2} B_j],
    A_j = Σ_i σ(θ̂_jᵀx_i)²,   B_j = Σ_i σ'(θ̂_jᵀx_i)² ‖x_i‖²,

and its minimum over the per-neuron symmetry ``(a_j, θ_j) → (t_j^{−c} a_j, t_j θ_j)`` is

    Υ = C_c Σ_j κ_j |u_j|^p,   u_j = a_j ‖θ_j‖^c,   κ_j = A_j^{1/(c+1)} B_j^{c/(c+1)},
    C_c = (2/n)(1 + c) c^{−c/(c+1)},   p = 2c/(c+1)

(Vardhan, Taheri, Mazumdar 2026, Lemma 1, as derived in shared/notes/formulas.md). With the
directions θ̂_j fixed, interpolation ``U u = y`` (``U_ij = σ(θ̂_jᵀx_i)``) is linear, so the
flattest interpolator on those features solves the convex problem

    min Σ_j κ_j |u_j|^p   s.t.   U u = y,

whose Lagrange dual ``max_λ yᵀλ − Σ_j f_j*(U_jᵀλ)`` (``f_j*(s) = (p−1) κ_j (|s|/(pκ_j))^q``,
``1/p + 1/q = 1``; for p = 1 the constraint ``|U_jᵀλ| ≤ κ_j``) certifies a lower bound for
every λ (weak duality). :func:`min_weighted_lp` returns both bounds and the gap.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog, minimize

__all__ = [
    "LpInterpolation",
    "NoInterpolator",
    "min_weighted_lp",
    "dual_value",
    "l2_route_bound",
    "homogeneous_features",
]


class NoInterpolator(ValueError):
    """y is not in the range of U: no interpolator exists on these features."""


@dataclass(frozen=True)
class LpInterpolation:
    """Certified solution of ``min Σ κ_j |a_j|^p s.t. U a = y``.

    ``primal`` is the objective at the feasible ``a`` (an upper bound on the optimum), ``dual``
    the dual objective at ``lam`` (a lower bound, after an explicit feasibility check),
    ``gap = primal − dual ≥ 0``; ``residual = ‖U a − y‖``.
    """

    primal: float
    dual: float
    gap: float
    a: np.ndarray
    lam: np.ndarray
    p: float
    residual: float

    @property
    def relative_gap(self) -> float:
        return self.gap / max(abs(self.primal), 1e-300)


def _check(U, y, weights, p):
    U, y, w = np.asarray(U, float), np.asarray(y, float), np.asarray(weights, float)
    if U.ndim != 2 or y.shape != (U.shape[0],) or w.shape != (U.shape[1],):
        raise ValueError(f"shapes must be U (n, m), y (n,), weights (m,); got {U.shape}, {y.shape}, {w.shape}")
    if not 1 <= p <= 2:
        raise ValueError(f"p must be in [1, 2], got {p}")
    if np.any(w <= 0) or not np.all(np.isfinite(w)):
        raise ValueError("weights must be finite and > 0")
    ls, *_ = np.linalg.lstsq(U, y, rcond=None)
    res = np.linalg.norm(U @ ls - y)
    if res > 1e-8 * max(np.linalg.norm(y), 1e-300):
        raise NoInterpolator(f"y is not in the range of U (least-squares residual {res:.3e}): no interpolator")
    return U, y, w


def dual_value(U: np.ndarray, y: np.ndarray, weights: np.ndarray, p: float, lam: np.ndarray) -> float:
    """The dual objective at λ: a lower bound on the optimum for every λ (for p = 1, λ is first
    scaled into the feasible set ``|U_jᵀλ| ≤ κ_j``)."""
    s = U.T @ lam
    if p == 1:
        ratio = np.max(np.abs(s) / weights)
        return float(y @ lam / ratio) if ratio > 1 else float(y @ lam)
    q = p / (p - 1)
    return float(y @ lam - np.sum((p - 1) * weights * (np.abs(s) / (p * weights)) ** q))


def _project(U, y, a):
    """The closest point to ``a`` with ``U a = y`` (least-squares correction)."""
    corr, *_ = np.linalg.lstsq(U, y - U @ a, rcond=None)
    return a + corr


def min_weighted_lp(U: np.ndarray, y: np.ndarray, weights: np.ndarray, p: float) -> LpInterpolation:
    """Solve ``min Σ_j κ_j |a_j|^p s.t. U a = y`` for 1 ≤ p ≤ 2 with a duality certificate.

    p = 1: a linear program (``a = a⁺ − a⁻``) solved by HiGHS; λ is HiGHS's equality marginals,
    checked for dual feasibility (and scaled into it if round-off pushed it out).
    1 < p ≤ 2: the dual is smooth and concave (q ≥ 2); it is maximized by trust-region Newton
    with its exact Hessian, the primal is recovered from the optimality condition
    ``a_j = sign(s_j)(|s_j|/(pκ_j))^{1/(p−1)}``, ``s = Uᵀλ``, and projected onto ``U a = y``.

    Raises:
        NoInterpolator: y is not in the range of U.
        ValueError: bad shapes, p outside [1, 2], non-positive weights.
    """
    U, y, w = _check(U, y, weights, p)
    n, m = U.shape
    if p == 1:
        res = linprog(
            np.concatenate([w, w]),
            A_eq=np.hstack([U, -U]),
            b_eq=y,
            bounds=(0, None),
            method="highs",
            options={"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10},
        )
        if res.status != 0:
            raise RuntimeError(f"HiGHS failed: {res.message}")
        a = res.x[:m] - res.x[m:]
        lam = np.asarray(res.eqlin.marginals, float)
        primal = float(w @ np.abs(a))
    else:
        q = p / (p - 1)

        def neg_dual(lam):
            s = U.T @ lam
            t = np.abs(s) / (p * w)
            value = y @ lam - np.sum((p - 1) * w * t**q)
            grad = y - U @ (np.sign(s) * t ** (q - 1))  # U a(λ), a(λ) the conjugate's argmax
            return -value, -grad

        def neg_hess(lam):
            s = U.T @ lam
            curv = (q - 1) / (p * w) * (np.abs(s) / (p * w)) ** (q - 2)
            return (U * curv) @ U.T

        lam0 = np.linalg.lstsq(U @ U.T, y, rcond=None)[0]
        lam0 *= _best_scale(U, y, w, p, lam0)
        res = minimize(neg_dual, lam0, jac=True, hess=neg_hess, method="trust-exact", options={"gtol": 1e-13})
        lam = res.x
        s = U.T @ lam
        a = _project(U, y, np.sign(s) * (np.abs(s) / (p * w)) ** (q - 1))
        primal = float(np.sum(w * np.abs(a) ** p))
    dual = dual_value(U, y, w, p, lam)
    return LpInterpolation(primal, dual, primal - dual, a, lam, p, float(np.linalg.norm(U @ a - y)))


def _best_scale(U, y, w, p, lam0) -> float:
    """argmax_t of the dual along t·λ0 (closed form)."""
    s = U.T @ lam0
    b = float(y @ lam0)
    if p == 1:
        return 1.0 / np.max(np.abs(s) / w)
    q = p / (p - 1)
    c = float(np.sum((p - 1) * w * (np.abs(s) / (p * w)) ** q))
    return (max(b, 0.0) / (q * c)) ** (1 / (q - 1)) if c > 0 else 1.0


def l2_route_bound(U: np.ndarray, y: np.ndarray, weights: np.ndarray, p: float) -> float:
    """A closed-form lower bound from the min-ℓ2 interpolant's dual direction λ0 = (UUᵀ)⁻¹y.

    The dual evaluated at the best multiple t·λ0 (closed form in t); weak duality makes it a
    valid lower bound whatever λ0 is (the route of the paper's Lemma 5).
    """
    U, y, w = _check(U, y, weights, p)
    lam0 = np.linalg.lstsq(U @ U.T, y, rcond=None)[0]
    return dual_value(U, y, w, p, lam0 * _best_scale(U, y, w, p, lam0))


# --------------------------------------------------------------------------- Υ, the symmetry-minimized trace
def _relu_power(z: np.ndarray, c: float) -> tuple[np.ndarray, np.ndarray]:
    pos = np.maximum(z, 0.0)
    return pos**c, c * pos ** (c - 1) if c != 1 else (z > 0).astype(float)


def homogeneous_features(theta: np.ndarray, x: np.ndarray, c: float) -> tuple[np.ndarray, np.ndarray, float]:
    """(U, κ, C_c) for inner weights ``theta`` (m, d), inputs ``x`` (n, d) and σ = ReLU^c.

    ``U_ij = σ(θ̂_jᵀx_i)``, ``κ_j = A_j^{1/(c+1)} B_j^{c/(c+1)}``, ``C_c = (2/n)(1+c)c^{−c/(c+1)}``:
    one pass over X for all neurons.
    """
    theta, x = np.asarray(theta, float), np.asarray(x, float)
    norms = np.linalg.norm(theta, axis=1)
    if np.any(norms == 0):
        raise ValueError("every θ_j must be non-zero")
    z = x @ (theta / norms[:, None]).T  # (n, m)
    act, deriv = _relu_power(z, c)
    a_coef = (act**2).sum(axis=0)
    b_coef = (deriv**2 * (x**2).sum(axis=1)[:, None]).sum(axis=0)
    kappa = a_coef ** (1 / (c + 1)) * b_coef ** (c / (c + 1))
    n = x.shape[0]
    return act, kappa, 2.0 / n * (1 + c) * c ** (-c / (c + 1))
