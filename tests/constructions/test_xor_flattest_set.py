"""The exact search of the flattest no-bias interpolators on XOR (docs/derivations.md §11).

References: the pricing ratio r_λ of constructions.flattest_relu (flat iff r = 1), Υ by the
evaluators' closed form over rescalings, the dense Hessian trace of the balanced width-4 net, and a
brute-force enumeration of every label-pure active set on a small training set. Tolerances: the
programs meet their constraints to HiGHS's 1e-7 feasibility tolerance on rows of norm √d; 1e-6
leaves room, and every other comparison is float64 round-off (1e-9).
"""

import itertools
import math

import numpy as np
import pytest
import torch
from scipy.optimize import linprog
from torch import nn

import evaluators as ev
from constructions.flattest_relu import pricing_ratio
from constructions.xor_flattest_set import (
    FlatNeuron,
    canonical_flat_neurons,
    cover_member,
    cube_population_mse,
    flat_upsilon,
    flattest_set,
    moved_member,
    other_flat_neurons,
)
from evaluators.symmetry_minimized import min_trace_over_rescalings


def _cube(n, d, seed):
    x = np.random.default_rng(seed).choice([-1.0, 1.0], size=(n, d))
    return x, x[:, 0] * x[:, 1]


def test_the_width4_net_is_flattest_by_three_routes():
    """Υ = 4√d by the closed form, by §11's formula, and by the dense Hessian trace of the balanced net."""
    d, (x, y) = 6, _cube(24, 6, 0)
    neurons = canonical_flat_neurons(d)
    theta, a = np.stack([n.theta for n in neurons]), np.array([n.sign for n in neurons])
    assert np.array_equal(np.maximum(x @ theta.T, 0) @ a, y)
    bound = 4 * math.sqrt(d)
    assert min_trace_over_rescalings(a, theta, x, 1.0) == pytest.approx(bound, rel=1e-12)
    assert flat_upsilon(theta, a, x) == pytest.approx(bound, rel=1e-12)
    # rescaled to balance, θ_j → s_j θ_j and a_j → a_j / s_j with s_j⁴ = a_j² B_j / A_j, the trace
    # (2/n) Σ_j (s_j² A_j + a_j² B_j / s_j²), A_j = Σ_i relu(θ_jᵀx_i)², B_j = Σ_{active} ‖x_i‖², is Υ
    z = x @ theta.T
    s = (a**2 * ((x**2).sum(1) @ (z > 0)) / (np.maximum(z, 0) ** 2).sum(0)) ** 0.25
    net = nn.Sequential(nn.Linear(d, 4, bias=False), nn.ReLU(), nn.Linear(4, 1, bias=False)).double()
    with torch.no_grad():
        net[0].weight.copy_(torch.from_numpy(theta * s[:, None]))
        net[2].weight.copy_(torch.from_numpy(a / s)[None])
    obj = ev.Objective(net, (torch.from_numpy(x), torch.from_numpy(y)))
    assert ev.hessian_trace(obj, method="exact").value == pytest.approx(bound, rel=1e-10)
    assert float(torch.trace(obj.hessian())) == pytest.approx(bound, rel=1e-10)


def _ratio(lam, x, theta, tol=1e-7):
    """``pricing_ratio`` with a sample active above ``tol`` (the programs' tolerance; see flat_upsilon)."""
    z = x @ theta / np.linalg.norm(theta)
    kept = np.where(z > tol, z, 0.0)
    near = pricing_ratio(lam, x, theta[None])[0]  # exact where no sample sits within tol of the kink
    ratio = abs(lam @ kept) / np.sqrt((kept**2).sum() * (x[z > tol] ** 2).sum())
    return ratio if np.any(np.abs(z) <= tol) else near


@pytest.mark.parametrize("n", [8, 14])
def test_every_flat_neuron_found_has_ratio_one_and_the_search_misses_none(n):
    """Against brute force: every label-pure set S with a nonempty P_S inside the box (an LP each)."""
    d, box = 4, 10.0
    x, y = _cube(n, d, 1)
    found, enumerated = other_flat_neurons(x, y, box, limit=200, node_limit=20000)
    assert enumerated
    lam = math.sqrt(d) * y
    quadrants = {tuple(nr.active(x)) for nr in canonical_flat_neurons(d)}
    for neuron in found:
        assert _ratio(lam, x, neuron.theta) == pytest.approx(1.0, abs=1e-9)
    brute = set()
    for sign in (1.0, -1.0):
        group = np.flatnonzero(y == sign)
        for size in range(1, len(group) + 1):
            for chosen in itertools.combinations(group, size):
                active = np.zeros(n, bool)
                active[list(chosen)] = True
                res = linprog(
                    np.zeros(d),
                    A_ub=x[~active],
                    b_ub=np.zeros((~active).sum()),
                    A_eq=x[active],
                    b_eq=np.ones(size),
                    bounds=[(-box, box)] * d,
                )
                if res.status == 0 and tuple(active) not in quadrants:
                    brute.add(tuple(active))
    assert {tuple(nr.active(x)) for nr in found} == brute
    # the control: a neuron off its polyhedron (a constant broken on S) is not flat
    if found:
        bent = found[0].theta + 0.3 * np.eye(d)[2]
        assert _ratio(lam, x, bent) < 1 - 1e-6


def test_below_the_regime_the_flattest_set_holds_arbitrarily_bad_members():
    d, (x, y) = 10, _cube(10, 10, 0)
    small, large = (flattest_set(x, y, box=b, limit=5, node_limit=20000) for b in (10.0, 100.0))
    assert not small.unique and any(small.unbounded)
    mse = []
    for found in (small, large):
        theta, a = moved_member(d, found)
        assert flat_upsilon(theta, a, x) == pytest.approx(4 * math.sqrt(d), rel=1e-9)
        assert np.abs(np.maximum(x @ theta.T, 0) @ a - y).max() <= 1e-6
        mse.append(cube_population_mse(theta, a, 4000, np.random.default_rng(0))[0])
    assert mse[1] > 10 * mse[0] > 10  # ten times the box, about a hundred times the error: no bound
    if small.cover is not None:
        theta, a = cover_member(d, small)
        assert flat_upsilon(theta, a, x) == pytest.approx(4 * math.sqrt(d), rel=1e-9)


def test_in_the_regime_the_width4_net_is_alone_and_exact():
    d, (x, y) = 10, _cube(80, 10, 1)
    found = flattest_set(x, y, box=10.0, limit=50, node_limit=20000)
    assert found.unique and all(found.rigid) and not any(found.unbounded)
    theta, a = moved_member(d, found)
    assert cube_population_mse(theta, a, 4000, np.random.default_rng(0)) == (0.0, 0.0)


def test_flat_upsilon_is_the_closed_form_away_from_kinks():
    g = np.random.default_rng(3)
    x, theta, a = g.standard_normal((30, 5)), g.standard_normal((7, 5)), g.standard_normal(7)
    assert flat_upsilon(theta, a, x, tol=0.0) == pytest.approx(min_trace_over_rescalings(a, theta, x, 1.0), rel=1e-12)
    assert isinstance(FlatNeuron(theta[0], 1.0).active(x), np.ndarray)
