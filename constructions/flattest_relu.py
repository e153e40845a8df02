"""The flattest interpolator of a two-layer ReLU net over all widths and directions, by column generation.

For ``f(x) = Σ_j a_j relu(θ_jᵀx)`` (no bias; a bias is a constant input coordinate) the Hessian
trace of the MSE at an interpolator, minimized over the per-neuron rescaling, is

    Υ = (4/n) Σ_j κ(θ̂_j) |u_j|,   κ(θ̂) = √(Σ_i relu(θ̂ᵀx_i)² · Σ_{i: θ̂ᵀx_i > 0} ‖x_i‖²),

with ``u_j = a_j ‖θ_j‖`` (``evaluators.interpolation_bounds``, c = 1, p = 1). Over every width and
every direction, the flattest interpolator solves an infinite linear program

    min Σ_j κ(θ̂_j)|u_j|  s.t.  Σ_j u_j relu(θ̂_jᵀx_i) = y_i,

whose dual is ``max yᵀλ s.t. r_λ(θ̂) = |Σ_i λ_i relu(θ̂ᵀx_i)| / κ(θ̂) ≤ 1 for every θ̂``. Column
generation solves the LP on a finite set of directions, then *prices*: it searches for a direction
with ``r_λ > 1`` and adds it. Within one activation pattern S, ``r_λ`` is maximized by the
least-squares fit ``θ = argmin ‖X_S θ − λ_S‖`` (a generalized Rayleigh quotient), so the pricing
ascends by refitting on the current pattern.

``search_lower_bound = (4/n) yᵀλ / max(1, r̂)``, r̂ the largest ratio the last pricing found,
would certify the optimum if the pricing were global. It is a multi-start local search and is not
(in the plane, against a dense dictionary, the value lands up to 0.2% above the optimum:
tests/constructions/test_flattest_relu.py); when the search stops converged the value equals Υ
within ``tol`` by construction, so it says no more than "the pricing found nothing". The rigorous
lower bound is ``memorizer_bound = (4/n) Σ_i ‖x_i‖ |y_i|`` is rigorous: by Cauchy–Schwarz,
``r_λ(θ̂) ≤ ‖λ_S‖ / √(Σ_S ‖x_i‖²) ≤ max_i |λ_i| / ‖x_i‖``, so ``λ_i = ‖x_i‖ sign(y_i)`` is dual
feasible (the argument of Wen, Li, Ma 2023, Thm 4.1, without the bias); a neuron active on one
sample only attains it, so when every sample can be isolated (n ≤ d in general position) a
memorizer is a flattest interpolator. (ReLU′(0) = 0 here: a sample with θ̂ᵀx_i = 0 is inactive;
optima sit on such kinks, where the loss is not twice differentiable.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from evaluators.interpolation_bounds import min_weighted_lp

__all__ = ["FlattestReLU", "flattest_relu_interpolator", "memorizer_bound", "pricing_ratio", "relu_kappa"]


def relu_kappa(theta: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Features ``U_ij = relu(θ̂_jᵀx_i)`` (n, m) and weights κ(θ̂_j) for unit rows ``theta`` (m, d)."""
    z = x @ theta.T
    act = np.maximum(z, 0.0)
    sq = (x**2).sum(axis=1)
    return act, np.sqrt((act**2).sum(axis=0) * ((z > 0) * sq[:, None]).sum(axis=0))


def pricing_ratio(lam: np.ndarray, x: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """``r_λ(θ̂) = |Σ_i λ_i relu(θ̂ᵀx_i)| / κ(θ̂)`` for each row of ``theta`` (0 where no sample is active)."""
    norms = np.linalg.norm(theta, axis=1, keepdims=True)
    act, kappa = relu_kappa(np.divide(theta, norms, out=np.zeros_like(theta), where=norms > 0), x)
    num = np.abs(lam @ act)
    return np.divide(num, kappa, out=np.zeros_like(num), where=kappa > 0)


def memorizer_bound(x: np.ndarray, y: np.ndarray) -> float:
    """``(4/n) Σ_i ‖x_i‖ |y_i|``: no interpolator has a smaller Υ (module docstring)."""
    return float(4 * np.mean(np.linalg.norm(x, axis=1) * np.abs(y)))


def _ascend(lam: np.ndarray, x: np.ndarray, theta: np.ndarray, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Ascend each start towards its pattern's maximizer while its ratio rises: (directions, ratios).

    The maximizer of ``r_λ`` on the pattern S ignoring the pattern's cone is the least-squares fit
    ``X_S θ ≈ λ_S``; the step moves along the segment towards it with backtracking (t = 1, ¼, …,
    4⁻⁵), since the fit itself may leave the cone. ``r_λ`` restricted to S is quasi-concave
    on each side of ``λ_Sᵀ X_S θ = 0`` (its super-level sets are second-order cones), so a short
    enough step towards ``±fit``, the sign of that side, never loses.
    """
    x_t, lam_t = torch.from_numpy(x), torch.from_numpy(lam)
    theta = theta / np.linalg.norm(theta, axis=1, keepdims=True)
    ratio = pricing_ratio(lam, x, theta)
    moving = np.ones(len(theta), bool)
    for _ in range(steps):
        idx = np.flatnonzero(moving)
        if not len(idx):
            break
        mask = torch.from_numpy((x @ theta[idx].T > 0).T.astype(float))  # (k, n)
        # gelsd (SVD), not the 3× faster gelsy: MKL's gelsy gave different solutions for the same inputs in
        # different processes (measured), and the search's path depends on every bit
        fit = torch.linalg.lstsq(mask[:, :, None] * x_t, (mask * lam_t)[:, :, None], driver="gelsd").solution
        fit = fit[:, :, 0].numpy()
        # the fit has λ_Sᵀ X_S θ ≥ 0; a start on the negative side ascends towards −fit
        side = np.sign(lam @ np.maximum(x @ theta[idx].T, 0.0))
        fit *= np.where(side == 0, 1.0, side)[:, None]
        best, best_ratio = theta[idx], ratio[idx]
        for t in 0.25 ** np.arange(6):
            step = (1 - t) * theta[idx] + t * fit
            norms = np.linalg.norm(step, axis=1, keepdims=True)
            step = np.divide(step, norms, out=np.zeros_like(step), where=norms > 0)
            r = pricing_ratio(lam, x, step)
            better = r > best_ratio * (1 + 1e-12)
            best, best_ratio = np.where(better[:, None], step, best), np.where(better, r, best_ratio)
        moved = best_ratio > ratio[idx]
        theta[idx], ratio[idx] = best, best_ratio
        moving[idx[~moved]] = False
    return theta, ratio


@dataclass(frozen=True)
class FlattestReLU:
    """The flattest interpolator found, with the bounds that bracket the true minimum.

    ``upsilon`` (an interpolator's value, an upper bound) ≥ min Υ ≥ ``memorizer_bound`` (always);
    ``search_lower_bound`` bounds min Υ only if the pricing search were global, which it is not
    (module docstring). ``theta`` has unit rows, ``u`` the outer weights of
    the balanced net; only the columns with ``u ≠ 0`` are kept.
    """

    theta: np.ndarray
    u: np.ndarray
    lam: np.ndarray
    upsilon: float
    search_lower_bound: float
    memorizer_bound: float
    largest_ratio: float
    residual: float
    rounds: int
    converged: bool
    starts_per_round: int
    verify_starts: int

    @property
    def gap_to_memorizer_bound(self) -> float:
        """``(Υ − memorizer_bound)/Υ``: how far from optimal at most, rigorously."""
        return (self.upsilon - self.memorizer_bound) / self.upsilon

    def predict(self, x: np.ndarray) -> np.ndarray:
        return np.maximum(np.asarray(x) @ self.theta.T, 0.0) @ self.u

    def predictor(self):
        """f on a torch batch (for ``evaluators.population_loss``)."""
        return lambda x: torch.from_numpy(self.predict(x.numpy()))

    def balanced_weights(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(W1, W2) of a net whose Hessian trace at this interpolator equals Υ: each neuron rescaled by
        ``t_j² = |u_j| √(B_j / A_j)``, the minimizer of ``t² A_j + (u_j/t)² B_j``."""
        act, _ = relu_kappa(self.theta, x)
        a_coef = (act**2).sum(axis=0)
        b_coef = ((x @ self.theta.T > 0) * (x**2).sum(axis=1)[:, None]).sum(axis=0)
        t = np.sqrt(np.abs(self.u) * np.sqrt(b_coef / a_coef))
        return self.theta * t[:, None], self.u / t


def _new_columns(lam, x, theta, ratio, limit: int, tol: float) -> np.ndarray:
    """The best directions with ratio > 1 + tol, at most ``limit``, no two nearly parallel."""
    keep: list[np.ndarray] = []
    for j in np.argsort(-ratio):
        if ratio[j] <= 1 + tol or len(keep) == limit:
            break
        if all(theta[j] @ k < 1 - 1e-9 for k in keep):
            keep.append(theta[j])
    return np.array(keep).reshape(-1, x.shape[1])


def flattest_relu_interpolator(
    x: np.ndarray,
    y: np.ndarray,
    generator: torch.Generator,
    *,
    starts: int = 1024,
    verify_starts: int = 8192,
    rounds: int = 400,
    columns_per_round: int = 64,
    ascent_steps: int = 30,
    tol: float = 1e-7,
) -> FlattestReLU:
    """Minimize Υ over all two-layer ReLU interpolators of (x, y) by column generation.

    Starts of each pricing round: the sample directions ``x_i/‖x_i‖`` of the ``starts/4`` largest
    |λ_i|, the directions in use, each perturbed, and random directions; every start is ascended
    (:func:`_ascend`). When a round finds no direction with ``r_λ > 1 + tol``, a search from
    ``verify_starts`` fresh starts must come back empty too before the loop ends (``converged``);
    its largest ratio r̂ makes ``search_lower_bound``. Otherwise the loop ends after ``rounds``.

    Raises:
        NoInterpolator: no interpolator on 4n random directions and the samples' own.
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    n, d = x.shape

    def randn(k: int) -> np.ndarray:
        g = torch.randn(k, d, generator=generator, dtype=torch.float64).numpy()
        return g / np.linalg.norm(g, axis=1, keepdims=True)

    theta = np.vstack([x / np.linalg.norm(x, axis=1, keepdims=True), randn(4 * n)])
    const = 4.0 / n

    def price(lam, active, count):
        top = np.argsort(-np.abs(lam))[: max(1, count // 4)]
        jitter = 0.1 * torch.randn(len(active), d, generator=generator, dtype=torch.float64).numpy()
        cand = np.vstack([x[top], active + jitter, randn(max(1, count - len(top) - len(active)))])
        parts = [_ascend(lam, x, c, ascent_steps) for c in np.array_split(cand, -(-len(cand) // 1024))]
        return np.vstack([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    rounds_run = 0
    for rounds_run in range(1, rounds + 1):  # noqa: B007 (the count is returned)
        act, kappa = relu_kappa(theta, x)
        used = kappa > 0
        theta, act, kappa = theta[used], act[:, used], kappa[used]
        sol, solved = min_weighted_lp(act, y, kappa, 1), theta
        cand, ratio = price(sol.lam, theta[np.abs(sol.a) > 0], starts)
        fresh = _new_columns(sol.lam, x, cand, ratio, columns_per_round, tol)
        if not len(fresh):  # before stopping, a larger independent search must also come back empty
            first = ratio
            cand, ratio = price(sol.lam, theta[np.abs(sol.a) > 0], verify_starts)
            fresh = _new_columns(sol.lam, x, cand, ratio, columns_per_round, tol)
            ratio = np.concatenate([first, ratio])
            if not len(fresh):
                break
        keep = np.abs(sol.a) > 0  # drop unused columns so the LP stays small
        theta = np.vstack([theta[keep], theta[~keep][: 2 * n], fresh])
    lam = sol.lam
    largest = max(float(ratio.max()), float((np.abs(lam @ act) / kappa).max()))
    keep = np.abs(sol.a) > 0
    return FlattestReLU(
        theta=solved[keep],
        u=sol.a[keep],
        lam=lam,
        upsilon=const * sol.primal,
        search_lower_bound=const * float(y @ lam) / max(1.0, largest),
        memorizer_bound=memorizer_bound(x, y),
        largest_ratio=largest,
        residual=sol.residual,
        rounds=rounds_run,
        converged=len(fresh) == 0,
        starts_per_round=starts,
        verify_starts=verify_starts,
    )
