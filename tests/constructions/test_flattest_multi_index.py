"""Vardhan et al.'s experiments at toy size: Lemma 1's orbit minimum and the certificate read as stated."""

import numpy as np
import pytest
import torch

import evaluators as ev
from constructions import flattest_multi_index as flattest
from constructions.multi_index import build_multi_index, random_directions
from constructions.specs import MultiIndexSpec
from evaluators import Objective


@pytest.mark.parametrize("c", [1, 2])
def test_orbit_minimum_meets_the_closed_form(rng, c):
    found = flattest.orbit_minimum(rng, n=5, d=3, m=6, c=c)
    assert found["found"] == pytest.approx(found["closed"], rel=1e-6)
    assert found["start"] >= found["found"] * (1 - 1e-9)


@pytest.mark.parametrize("c", [1, 2, 3])
def test_the_searched_trace_is_the_evaluators_dense_trace(rng, c):
    # the orbit search differentiates its own dense trace; it must be the evaluator's, at any t
    n, d, m = 5, 3, 4
    x, y = torch.tensor(rng.standard_normal((n, d))), torch.tensor(rng.standard_normal(n))
    a, theta, log_t = rng.standard_normal(m), rng.standard_normal((m, d)), rng.standard_normal(m)
    searched = flattest._dense_trace_on_orbit(torch.tensor(a), torch.tensor(theta), x, y, c)(torch.tensor(log_t))
    t = np.exp(log_t)
    obj = Objective(flattest.HomogeneousNet(a * t ** (-c), theta * t[:, None], c), (x, y))
    assert float(searched) == pytest.approx(ev.hessian_trace(obj, method="exact").value, rel=1e-12)


def test_certificate_exposes_a_feasible_non_minimizer(gen):
    problem = build_multi_index(MultiIndexSpec(n=16, d=16, c=2), gen)
    directions = random_directions(problem, 32, gen)
    best = flattest.certified_interpolator(problem, directions, 2)
    assert abs(best["relative_gap"]) < 1e-6 and best["l2_bound"] <= best["primal"] * (1 + 1e-12)
    other = flattest.certified_interpolator(problem, directions, 2, at_min_l2=True)
    assert other["primal"] > best["primal"] and other["relative_gap"] > 1e-3 and other["residual"] < 1e-8


def test_bad_ratios_shape_and_gaps(gen):
    import torch

    split, single, gaps = flattest.bad_to_flattest_ratios(
        (16, 24), 2, 1, 0.0, lambda n, s: torch.Generator().manual_seed(100 * n + s), d_over_n=1.0, width_factor=2.0
    )
    assert split.shape == single.shape == (2, 2) and len(gaps) == 4
    assert np.all(split > 0) and max(abs(g) for g in gaps) < 1e-6
