"""min_weighted_lp against closed forms and an independent solver; Υ against the autograd trace."""

import numpy as np
import pytest
import torch
from scipy.optimize import minimize
from torch import nn

from evaluators import Objective, hessian_trace
from evaluators.interpolation_bounds import (
    NoInterpolator,
    homogeneous_features,
    l2_route_bound,
    min_weighted_lp,
)
from evaluators.symmetry_minimized import min_trace_over_rescalings

GAP_RTOL = 1e-8  # the solvers run to 1e-10 (HiGHS) and gtol 1e-13 (trust-exact); observed gaps ~1e-14


@pytest.fixture
def problem(rng):
    n, m = 12, 30
    return rng.standard_normal((n, m)), rng.standard_normal(n), rng.uniform(0.5, 2.0, m)


def test_p2_matches_closed_form(problem):
    U, y, w = problem
    a = (1 / w) * (U.T @ np.linalg.solve((U / w) @ U.T, y))  # argmin Σ κ a² s.t. U a = y
    r = min_weighted_lp(U, y, w, 2.0)
    assert r.primal == pytest.approx(float(w @ a**2), rel=1e-10)
    assert np.allclose(r.a, a, atol=1e-9)


@pytest.mark.parametrize("p", [1.0, 4 / 3, 1.5, 1.8])
def test_matches_independent_solver_and_certifies(problem, p):
    U, y, w = problem
    r = min_weighted_lp(U, y, w, p)
    assert r.residual <= 1e-9
    assert abs(r.relative_gap) <= GAP_RTOL  # ≥ 0 up to round-off: the dual is a certified lower bound
    # independent: SLSQP on the smoothed objective with the equality constraint
    ref = minimize(
        lambda a: np.sum(w * np.sqrt(a**2 + 1e-14) ** p),
        np.linalg.pinv(U) @ y,
        method="SLSQP",
        constraints=[{"type": "eq", "fun": lambda a: U @ a - y}],
        options={"maxiter": 1000, "ftol": 1e-14},
    )
    assert r.primal <= ref.fun * (1 + 1e-6)
    assert r.primal == pytest.approx(ref.fun, rel=1e-4)
    assert l2_route_bound(U, y, w, p) <= r.primal * (1 + 1e-12)


def test_p1_dual_is_feasible(problem):
    U, y, w = problem
    r = min_weighted_lp(U, y, w, 1.0)
    assert np.max(np.abs(U.T @ r.lam) / w) <= 1 + 1e-8
    assert r.dual == pytest.approx(float(y @ r.lam), rel=1e-8)


def test_no_interpolator_and_bad_arguments(rng):
    U = rng.standard_normal((5, 3))  # 5 equations, 3 unknowns: generic y is out of range
    with pytest.raises(NoInterpolator, match="not in the range"):
        min_weighted_lp(U, rng.standard_normal(5), np.ones(3), 1.0)
    U = rng.standard_normal((3, 5))
    with pytest.raises(ValueError, match="p must be"):
        min_weighted_lp(U, rng.standard_normal(3), np.ones(5), 2.5)
    with pytest.raises(ValueError, match="weights"):
        min_weighted_lp(U, rng.standard_normal(3), -np.ones(5), 1.0)


class HomogeneousNet(nn.Module):
    def __init__(self, a, theta, c):
        super().__init__()
        self.a, self.theta, self.c = nn.Parameter(torch.tensor(a)), nn.Parameter(torch.tensor(theta)), c

    def forward(self, x):
        return torch.relu(x @ self.theta.T) ** self.c @ self.a


@pytest.mark.parametrize("c", [1, 2, 3])
def test_upsilon_is_the_orbit_minimum_of_the_exact_trace(rng, c):
    n, d, m = 6, 3, 8
    x = rng.standard_normal((n, d))
    theta = rng.standard_normal((m, d))
    y = rng.standard_normal(n)
    U, _, _ = homogeneous_features(theta, x, c)
    u = np.linalg.lstsq(U, y, rcond=None)[0]  # an interpolator on these directions
    a = u / np.linalg.norm(theta, axis=1) ** c
    closed = min_trace_over_rescalings(a, theta, x, c)

    def trace_at(log_t):
        t = np.exp(log_t)
        net = HomogeneousNet(a * t ** (-c), theta * t[:, None], c)
        obj = Objective(net, (torch.tensor(x), torch.tensor(y)))
        return hessian_trace(obj, method="exact").value

    # the interpolator is exact, so the trace equals the Gauss–Newton trace along the orbit
    res = minimize(trace_at, np.zeros(m), method="L-BFGS-B", options={"maxiter": 5000})
    assert res.fun == pytest.approx(closed, rel=1e-6)
    assert trace_at(np.zeros(m)) >= closed * (1 - 1e-12)
