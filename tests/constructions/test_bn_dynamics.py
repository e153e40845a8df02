"""Lyu et al.'s experiments at toy size: identities to round-off, and the helpers read trajectories as stated."""

import numpy as np
import pytest
import torch

from constructions import bn_dynamics
from constructions.bn_regression import Trajectory, build_bn_regression
from constructions.specs import BNLinearRegressionSpec
from evaluators import Objective


@pytest.fixture
def problem(gen):
    return build_bn_regression(BNLinearRegressionSpec(n=8, d=12), gen)


def test_scale_invariance_holds_for_bn_and_not_for_least_squares(problem, gen):
    w = torch.randn(12, generator=gen, dtype=torch.float64)
    obj = Objective(problem.model(w), (problem.data.x, problem.data.y))
    errors = bn_dynamics.scale_invariance_errors(obj, ["w"], obj.theta, 7.0)
    assert max(errors.values()) < 1e-10
    bn = bn_dynamics.effective_lr_errors(problem.loss_and_grad, w, 0.1, 0.01, 20)
    assert max(bn["direction"] + bn["norm_recursion"]) < 1e-12
    plain = bn_dynamics.effective_lr_errors(bn_dynamics.plain_least_squares(problem), w, 0.1, 0.01, 20)
    assert max(plain["direction"]) > 1e-6


def test_plain_least_squares_gradient_is_autograd(problem, gen):
    w = torch.randn(12, generator=gen, dtype=torch.float64, requires_grad=True)
    loss, grad = bn_dynamics.plain_least_squares(problem)(w)
    (auto,) = torch.autograd.grad(loss, w)
    assert torch.allclose(grad, auto, rtol=1e-12, atol=1e-14)


def test_cycle_midpoint_of_a_fixed_direction_is_twice_the_unit_vector(problem):
    w_mn, _ = problem.min_norm_interpolant()
    mid = bn_dynamics.cycle_midpoint(problem, w_mn[None], 0.1, 0.0)  # at an interpolant GD does not move
    assert torch.allclose(mid[0], 2 * w_mn / w_mn.norm(), atol=1e-9)


def _trajectory(loss, sharpness, cos=None, eff_lr=None):
    loss, sharpness = np.asarray(loss, float), np.asarray(sharpness, float)
    ones = np.ones_like(loss)
    return Trajectory(
        steps=np.arange(len(loss)), loss=loss, norm=ones, eff_lr=ones if eff_lr is None else eff_lr,
        sharpness=sharpness, cos=ones if cos is None else np.asarray(cos, float), w=torch.zeros(1, 1),
    )  # fmt: skip


def test_trajectory_readers():
    frozen = _trajectory([[1.0], [1e-7], [1e-8], [1e-9]], [[5.0], [4.0], [4.0], [4.04]])
    moving = _trajectory([[1.0], [1e-7], [1e-8], [1e-9]], [[5.0], [4.0], [3.0], [2.0]])
    changes, reductions = bn_dynamics.sharpness_after_small_loss(frozen, moving, 1e-6)
    assert changes == [pytest.approx(0.01)] and reductions == [pytest.approx(0.5)]
    with pytest.raises(RuntimeError, match="small-loss"):
        bn_dynamics.sharpness_after_small_loss(frozen, moving, 1e-12)
    cosine = _trajectory([[1.0]] * 4, [[1.0]] * 4, cos=[[0.5], [0.9], [0.995], [0.999]])
    assert bn_dynamics.hitting_time(cosine, 0.1, 0.01, 0.99) == pytest.approx(2 * 0.1 * 0.01)
    assert bn_dynamics.hitting_time(cosine, 0.1, 0.01, 0.9999) is None
    eos = _trajectory([[1.0]] * 4, [[4.0], [4.0], [3.0], [3.0]], eff_lr=np.full((4, 1), 0.5))
    (run,) = bn_dynamics.reduction_after_entry(eos, np.array([2.9]), tolerance=0.01)
    assert run["reached"] and run["at_entry"] == 4.0 and run["final"] == 2.9 and run["decreasing"]
