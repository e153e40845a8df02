"""Vardhan, Taheri, Mazumdar 2026's experiments: flattest, bad and random-feature interpolators of multi-index data.

The orbit-minimal trace of a two-layer ReLU^c interpolator f(x) = Σ_j a_j relu(θ_jᵀx)^c is
(Lemma 1, docs/derivations.md §5)

    Υ = (2/n)(1+c) c^{−c/(c+1)} Σ_j |u_j|^p A_j^{1/(c+1)} B_j^{c/(c+1)},  u_j = a_j‖θ_j‖^c,  p = 2c/(c+1),

so on fixed directions the flattest interpolator is a convex weighted-ℓp program, solved with a
duality certificate (:mod:`constructions.multi_index`, :mod:`evaluators.interpolation_bounds`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from scipy.optimize import minimize
from torch import nn

import evaluators as ev
from constructions.multi_index import (
    aligned_interpolator,
    build_multi_index,
    flattest_on_directions,
    misaligned_directions,
    noiseless,
    random_directions,
    teacher_dictionary,
)
from constructions.specs import MultiIndexSpec
from evaluators import Objective
from evaluators.interpolation_bounds import homogeneous_features, l2_route_bound

__all__ = [
    "DICTIONARY_KINDS",
    "HomogeneousNet",
    "bad_to_flattest_ratios",
    "certified_interpolator",
    "constant_predictor_loss",
    "dictionary_interpolators",
    "largest_outer_weight",
    "orbit_minimum",
]

DICTIONARY_KINDS = ("flattest (Θ* ∪ random)", "bad (misaligned)", "random features")


class HomogeneousNet(nn.Module):
    """f(x) = Σ_j a_j relu(θ_jᵀx)^c with (a, θ) as parameters (for the autograd trace)."""

    def __init__(self, a: np.ndarray, theta: np.ndarray, c: int):
        super().__init__()
        self.a = nn.Parameter(torch.tensor(a, dtype=torch.float64))
        self.theta = nn.Parameter(torch.tensor(theta, dtype=torch.float64))
        self.c = c

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x @ self.theta.T) ** self.c @ self.a


def orbit_minimum(rng: np.random.Generator, n: int, d: int, m: int, c: int, residual: float = 0.0) -> dict:
    """Lemma 1 on one Gaussian instance: the exact trace at t = 1, its minimum over per-neuron
    rescalings (a_j t_j^{−c}, θ_j t_j), found by L-BFGS-B on log t (ftol 1e-15), and the closed form
    Υ; the outer weights interpolate exactly, or are moved off by ``residual`` · N(0, 1).

    The search differentiates the dense trace ``Σ_k ∂²L/∂p_k²`` (``torch.func``, no closed form
    used) with respect to log t; both reported traces are the evaluator's
    (``ev.hessian_trace(method="exact")``) at the start and at the point found.
    """
    x, theta, y = rng.standard_normal((n, d)), rng.standard_normal((m, d)), rng.standard_normal(n)
    features, _, _ = homogeneous_features(theta, x, c)
    u = np.linalg.lstsq(features, y, rcond=None)[0]  # exact interpolator on these directions
    u = u + residual * rng.standard_normal(m) if residual else u
    a = u / np.linalg.norm(theta, axis=1) ** c
    x_t, y_t = torch.tensor(x), torch.tensor(y)

    def trace_at(log_t: np.ndarray) -> float:
        t = np.exp(log_t)
        obj = Objective(HomogeneousNet(a * t ** (-c), theta * t[:, None], c), (x_t, y_t))
        return ev.hessian_trace(obj, method="exact").value

    search = torch.func.grad_and_value(_dense_trace_on_orbit(torch.tensor(a), torch.tensor(theta), x_t, y_t, c))

    def value_and_gradient(log_t: np.ndarray) -> tuple[float, np.ndarray]:
        grad, value = search(torch.from_numpy(log_t))
        return float(value), grad.numpy()

    res = minimize(
        value_and_gradient, np.zeros(m), jac=True, method="L-BFGS-B", options={"maxiter": 5000, "ftol": 1e-15}
    )
    return {
        "start": trace_at(np.zeros(m)),
        "found": trace_at(res.x),
        "closed": ev.min_trace_over_rescalings(a, theta, x, c),
    }


def _dense_trace_on_orbit(a: torch.Tensor, theta: torch.Tensor, x: torch.Tensor, y: torch.Tensor, c: int):
    """``log t ↦ Tr ∇²L`` at ``(a t^{−c}, θ t)``, ``L = (1/n) Σ_i (f(x_i) − y_i)²``, from the dense Hessian."""
    m = len(a)

    def loss(params: torch.Tensor) -> torch.Tensor:
        outer, inner = params[:m], params[m:].reshape(theta.shape)
        return ((torch.relu(x @ inner.T) ** c @ outer - y) ** 2).mean()

    def trace(log_t: torch.Tensor) -> torch.Tensor:
        t = log_t.exp()
        params = torch.cat([a * t ** (-c), (theta * t[:, None]).reshape(-1)])
        return torch.func.hessian(loss)(params).diagonal().sum()

    return trace


def bad_to_flattest_ratios(
    sizes: Sequence[int],
    draws: int,
    c: int,
    rho: float,
    generator: Callable[[int, int], torch.Generator],
    *,
    d_over_n: float,
    width_factor: float,
) -> tuple[np.ndarray, np.ndarray, list[float]]:
    """Υ(bad)/Υ* per (size, draw) against the split teacher and against the one-neuron teacher, and
    every duality gap touched; ``generator(n, draw)`` draws the data and the bad directions.

    The bad interpolator is the flattest on m = width_factor · n directions with misalignment ρ* = ``rho``
    (Def. 2). The split teacher (each teacher neuron spread evenly over the m neurons) is the
    flattest aligned interpolator of width m; the one-neuron teacher is kept for comparison.
    """
    split = np.zeros((len(sizes), draws))
    single = np.zeros_like(split)
    gaps = []
    for i, n in enumerate(sizes):
        for s in range(draws):
            spec = MultiIndexSpec(n=n, d=max(2, round(d_over_n * n)), c=c)
            gen = generator(n, s)
            problem = build_multi_index(spec, gen)
            m = round(width_factor * n)
            bad = flattest_on_directions(problem, misaligned_directions(problem, m, rho, gen))
            gaps.append(bad.solution.relative_gap)
            split[i, s] = bad.upsilon / aligned_interpolator(problem, m).upsilon
            single[i, s] = bad.upsilon / aligned_interpolator(problem).upsilon
    return split, single, gaps


def certified_interpolator(problem, directions: np.ndarray, c: int, *, at_min_l2: bool = False) -> dict:
    """The flattest interpolator on ``directions``: primal, dual, relative gap, the ℓ2-route lower
    bound and the residual ‖Ua − y‖. ``at_min_l2``: the primal at the minimum-ℓ2 interpolant instead,
    feasible but not the minimizer (what the certificate must expose)."""
    interp = flattest_on_directions(problem, directions)
    sol = interp.solution
    features, kappa, _ = homogeneous_features(interp.theta, problem.x, c)
    primal, residual = sol.primal, sol.residual
    if at_min_l2:
        a = np.linalg.lstsq(features, problem.y, rcond=None)[0]
        primal = float(np.sum(kappa * np.abs(a) ** sol.p))
        residual = float(np.linalg.norm(features @ a - problem.y))
    return {
        "primal": primal,
        "dual": sol.dual,
        "relative_gap": (primal - sol.dual) / max(abs(primal), 1e-300),
        "l2_bound": l2_route_bound(features, problem.y, kappa, sol.p),
        "residual": residual,
    }


def dictionary_interpolators(
    spec: MultiIndexSpec, gen: torch.Generator, width_factor: float, pop_samples: int, seed: int
) -> tuple[dict[str, tuple[float, float, float]], float]:
    """Flattest over Θ* ∪ random directions, bad (misaligned, ρ* = 0) and random-feature flattest on one draw.

    Returns {kind: (Υ, excess population loss E(f − σ*)², relative duality gap)} and the share of
    |a| the dictionary-flattest puts on the Θ* rows.
    """
    problem = build_multi_index(spec, gen)
    m = round(width_factor * spec.n)
    found = dict(
        zip(
            DICTIONARY_KINDS,
            (
                flattest_on_directions(problem, teacher_dictionary(problem, m, gen)),
                flattest_on_directions(problem, misaligned_directions(problem, m, 0.0, gen)),
                flattest_on_directions(problem, random_directions(problem, m, gen)),
            ),
            strict=True,
        )
    )
    clean = noiseless(problem)
    out = {}
    for kind, interp in found.items():
        pop = ev.population_loss(interp.predictor(spec.c), clean, samples=pop_samples, seed=seed)
        out[kind] = (interp.upsilon, pop.value, interp.solution.relative_gap)
    a = np.abs(found[DICTIONARY_KINDS[0]].a)
    return out, float(a[: spec.m_star].sum() / a.sum())


def constant_predictor_loss(spec: MultiIndexSpec, samples: int, generator: torch.Generator, draw: torch.Generator):
    """Var σ*(Θ*x) over ``samples`` fresh noiseless labels: the excess loss of the best constant predictor."""
    problem = build_multi_index(spec, generator)
    _, y_clean = problem.sample(samples, draw)
    return float(y_clean.var())


def largest_outer_weight(
    spec: MultiIndexSpec, widths: Sequence[int], draws: int, generator: Callable[[int], torch.Generator]
) -> tuple[np.ndarray, list[float]]:
    """‖a‖∞ of the flattest interpolator on m random unit directions, per draw (rows) and width m
    (columns; each draw's widths drawn one after another from ``generator(draw)``), and the duality gaps."""
    sup = np.zeros((draws, len(widths)))
    gaps = []
    for k in range(draws):
        gen = generator(k)
        problem = build_multi_index(spec, gen)
        for i, m in enumerate(widths):
            interp = flattest_on_directions(problem, random_directions(problem, m, gen))
            sup[k, i] = np.abs(interp.a).max()
            gaps.append(interp.solution.relative_gap)
    return sup, gaps
