"""The quadratic parametrization: its trace formula against a dense Hessian, the LP minimum, the trainers."""

import numpy as np
import pytest
import torch

from constructions.quadratic_sparse import (
    SparseRegressionSpec,
    TrainSettings,
    anisotropic_sparse_regression,
    as_module,
    basis_pursuit,
    hessian_trace,
    min_trace_interpolator,
    sparse_regression,
    split,
    train,
)
from evaluators import Objective

SMALL = SparseRegressionSpec(n=12, d=20, k=2)


def _dense_trace(u, v, data, power=2):
    obj = Objective(as_module(u, v, power), (torch.tensor(data.x), torch.tensor(data.y)))
    return float(torch.trace(obj.hessian()))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_trace_formula_matches_the_dense_hessian_everywhere(seed):
    # exact identity in float64: the dense autograd Hessian of 2d = 40 parameters, round-off ~1e-14
    rng = np.random.default_rng(seed)
    data = sparse_regression(SMALL, rng)
    u, v = rng.standard_normal((2, SMALL.d))
    assert hessian_trace(u, v, data.x) == pytest.approx(_dense_trace(u, v, data), rel=1e-12)
    assert hessian_trace(u, v, data.x) != pytest.approx(_dense_trace(u, v, data, power=1), rel=1e-3)


def test_the_lp_interpolator_has_the_least_trace_among_interpolators():
    rng = np.random.default_rng(3)
    data = sparse_regression(SMALL, rng)
    lp = min_trace_interpolator(data)
    u, v = split(lp.w)
    assert lp.residual < 1e-10
    assert hessian_trace(u, v, data.x) == pytest.approx(lp.trace, rel=1e-12)
    assert np.allclose(lp.w, data.w_star, atol=1e-8)  # n = 12 ≥ what 2-sparse recovery in d = 20 needs here
    # any other interpolator (the min-ℓ2 one; the LP's with a null-space move) has a larger trace
    others = [np.linalg.pinv(data.x) @ data.y]
    null = np.linalg.svd(data.x)[2][-1]
    others.append(lp.w + 0.1 * null)
    for w in others:
        assert np.abs(data.x @ w - data.y).max() < 1e-9
        assert hessian_trace(*split(w), data.x) > lp.trace * (1 + 1e-6)


def test_gd_interpolates_and_the_projection_lands_on_an_interpolator():
    data = sparse_regression(SMALL, np.random.default_rng(4))
    gd = train(data, TrainSettings(method="gd", lr=4e-3, steps=5000), 1, np.random.default_rng(0))
    assert gd.final_loss[0] < 1e-16 and not gd.diverged.any()
    sgd = train(data, TrainSettings(method="sgd", label_noise=1.0, lr=4e-3, steps=2000), 3, np.random.default_rng(0))
    assert (sgd.final_loss < 1e-16).all()
    assert sgd.trace.shape == (len(sgd.steps), 3)


def test_runs_repeat_from_their_seed_and_gd_refuses_label_noise():
    data = sparse_regression(SMALL, np.random.default_rng(5))
    settings = TrainSettings(method="sgd", label_noise=1.0, lr=4e-3, steps=500)
    a, b = (train(data, settings, 2, np.random.default_rng(9)) for _ in range(2))
    assert np.array_equal(a.u, b.u) and np.array_equal(a.v, b.v)
    with pytest.raises(ValueError, match="label_noise applies to SGD"):
        train(data, TrainSettings(method="gd", label_noise=1.0), 1, np.random.default_rng(0))


@pytest.mark.parametrize("support_on", ["high", "low"])
def test_anisotropic_data_put_the_truth_on_the_asked_half(support_on):
    data, scales = anisotropic_sparse_regression(SMALL, 9.0, support_on, np.random.default_rng(0))
    assert np.allclose(scales[:10], 3.0) and np.allclose(scales[10:], 1 / 3)
    support = np.flatnonzero(data.w_star)
    assert len(support) == SMALL.k and (support < 10).all() == (support_on == "high")
    assert np.allclose(data.y, data.x @ data.w_star)
    spread = data.x.std(axis=0)
    assert spread[:10].mean() > 3 * spread[10:].mean()


def test_basis_pursuit_interpolates_and_beats_the_truth():
    """The truth is feasible, so the LP's weighted ℓ1 is at most the truth's, for any positive weights."""
    data, _ = anisotropic_sparse_regression(SMALL, 4.0, "high", np.random.default_rng(1))
    for weights in (np.ones(SMALL.d), (data.x**2).sum(axis=0)):
        w = basis_pursuit(data.x, data.y, weights)
        assert np.abs(data.x @ w - data.y).max() < 1e-8
        assert weights @ np.abs(w) <= weights @ np.abs(data.w_star) * (1 + 1e-9)
