"""BN linear regression: closed-form loss and gradient against autograd; equivalent linear model."""

import pytest
import torch

from constructions.bn_regression import build_bn_regression, gradient_descent
from constructions.divergence import Diverged
from constructions.specs import BNLinearRegressionSpec
from evaluators import Objective


def test_closed_form_matches_autograd(gen):
    problem = build_bn_regression(BNLinearRegressionSpec(n=12, d=20, noise=0.1), gen)
    w = torch.randn(3, 20, generator=gen, dtype=torch.float64)
    loss, grad = problem.loss_and_grad(w)
    for i in range(3):
        obj = Objective(problem.model(w[i]), (problem.data.x, problem.data.y))
        ref_loss, ref_grad = obj.loss_and_grad(obj.theta)
        assert abs(float(loss[i]) - ref_loss) <= 1e-13 * ref_loss
        assert torch.allclose(grad[i], ref_grad, rtol=1e-11, atol=1e-14)


@pytest.mark.parametrize("shape", [(3, 20), (20,)])
def test_numpy_gradient_has_the_same_bits_as_the_torch_one(gen, shape):
    # GD's trajectories (and so the committed records) depend on these bits, not on a tolerance
    problem = build_bn_regression(BNLinearRegressionSpec(n=12, d=20, noise=0.1), gen)
    w = torch.randn(*shape, generator=gen, dtype=torch.float64)
    assert torch.equal(torch.from_numpy(problem.gradient(w.numpy())), problem.loss_and_grad(w)[1])


def test_equivalent_linear_model(gen):
    problem = build_bn_regression(BNLinearRegressionSpec(n=10, d=6), gen)
    w = torch.randn(6, generator=gen, dtype=torch.float64)
    w_t, b_t = problem.equivalent_linear(w)
    with torch.no_grad():
        out = problem.model(w)(problem.data.x)
    assert torch.allclose(problem.data.x @ w_t + b_t, out, rtol=1e-12)


def test_min_norm_interpolant_interpolates(gen):
    problem = build_bn_regression(BNLinearRegressionSpec(n=10, d=30), gen)
    w, b = problem.min_norm_interpolant()
    assert torch.allclose(problem.data.x @ w + b, problem.data.y, atol=1e-10)
    centred = problem.data.x - problem.data.x.mean(0)
    assert torch.allclose(torch.linalg.pinv(centred) @ (centred @ w), w, atol=1e-10)  # w in the row space


def test_gradient_descent_stops_on_non_finite_weights(gen):
    problem = build_bn_regression(BNLinearRegressionSpec(n=12, d=20), gen)
    w0 = torch.randn(2, 20, generator=gen, dtype=torch.float64)
    w0[1, 3] = float("nan")
    with pytest.raises(Diverged, match="diverged at step 0"):
        gradient_descent(problem, w0, lr=0.1, weight_decay=0.01, steps=10, log_every=2)
