"""Objective: values, gradients and HVPs against references, and no mutation of the model."""

import copy

import pytest
import torch
from torch import nn

from evaluators import Objective, hessian_top_eigenvalue, hessian_trace
from tests.evaluators.conftest import make_model, make_objective, reference_hessian

# Central differences of the autograd gradient have truncation error O(h² ‖∇³L‖) ≈ 1e-10·‖∇³L‖
# and round-off O(ε‖∇L‖/h) ≈ 1e-11 at h = 1e-5; 1e-6 relative to max|H| leaves a wide margin.
FD_STEP, FD_RTOL = 1e-5, 1e-6


def test_mse_convention():
    obj = make_objective("relu-deep-3out")
    with torch.no_grad():
        out = obj.forward()
    expected = ((out - obj.targets) ** 2).sum(dim=1).mean()
    assert torch.allclose(obj.loss().detach(), expected, rtol=1e-14)


def test_reference_hessian_matches_finite_differences(case):
    obj = make_objective(case)
    h = reference_hessian(obj)
    p = obj.num_params
    fd = torch.stack(
        [
            (obj.grad(obj.theta + FD_STEP * e) - obj.grad(obj.theta - FD_STEP * e)) / (2 * FD_STEP)
            for e in torch.eye(p, dtype=torch.float64)
        ]
    )
    assert (fd - h).abs().max() <= FD_RTOL * h.abs().max()


def test_hvp_matches_reference_and_is_symmetric(case):
    obj = make_objective(case)
    raw = obj.hvp(torch.eye(obj.num_params, dtype=torch.float64))
    ref = reference_hessian(obj)
    assert (raw - raw.T).abs().max() <= 1e-12 * ref.abs().max()
    assert torch.allclose(raw, ref, rtol=1e-10, atol=1e-12 * ref.abs().max())


def test_hvp_cache_follows_theta():
    obj = make_objective("tanh-bias-1out")
    v = torch.randn(obj.num_params, dtype=torch.float64)
    other = obj.theta + 0.1
    first = obj.hvp(v)
    moved = obj.hvp(v, other)
    assert not torch.allclose(first, moved)
    assert torch.equal(obj.hvp(v), first)
    assert torch.allclose(moved, reference_hessian(obj, other) @ v, rtol=1e-10)


def test_linear_operator_and_with_params():
    obj = make_objective("relu-bias-1out")
    op = obj.linear_operator()
    v = torch.randn(obj.num_params, dtype=torch.float64)
    assert torch.allclose(torch.from_numpy(op @ v.numpy()), obj.hvp(v), rtol=1e-12)
    moved = obj.with_params(obj.theta * 2)
    assert torch.equal(moved.theta, obj.theta * 2) and not torch.equal(moved.theta, obj.theta)


@pytest.mark.parametrize("train_flag", [True, False])
def test_evaluators_never_mutate_the_model(train_flag):
    model = make_model(bn=True)
    model.train(train_flag)
    before = copy.deepcopy(model.state_dict())
    x, y = torch.randn(10, 4, dtype=torch.float64), torch.randn(10, 1, dtype=torch.float64)
    results = []
    for _ in range(2):
        obj = Objective(model, (x, y))
        results.append((hessian_top_eigenvalue(obj).value, hessian_trace(obj).value, float(obj.loss())))
    after = model.state_dict()
    assert model.training is train_flag
    assert all(torch.equal(before[k], after[k]) for k in before)  # incl. BN running stats
    assert results[0] == results[1]


def test_batchnorm_uses_batch_statistics_even_in_eval_mode():
    model = make_model(bn=True).eval()
    x, y = torch.randn(10, 4, dtype=torch.float64), torch.randn(10, 1, dtype=torch.float64)
    with torch.no_grad():
        train_out = copy.deepcopy(model).train()(x)
    assert torch.allclose(Objective(model, (x, y)).forward(), train_out)


def test_batch_size_averages_batch_losses():
    model = make_model(bn=True)
    x, y = torch.randn(12, 4, dtype=torch.float64), torch.randn(12, 1, dtype=torch.float64)
    full = Objective(model, (x, y), batch_size=4)
    parts = [Objective(model, (x[i : i + 4], y[i : i + 4])).loss() for i in (0, 4, 8)]
    assert torch.allclose(full.loss(), torch.stack(parts).mean(), rtol=1e-14)


def test_cross_entropy_and_errors():
    model = make_model(outputs=3)
    x = torch.randn(9, 4, dtype=torch.float64)
    y = torch.tensor([0, 1, 2] * 3)
    obj = Objective(model, (x, y), loss="cross_entropy")
    assert torch.allclose(obj.loss(), nn.functional.cross_entropy(model(x), y), rtol=1e-14)
    with pytest.raises(ValueError, match="loss must be"):
        Objective(model, (x, y), loss="hinge")
    with pytest.raises(ValueError, match="disagree on n"):
        Objective(model, (x, y[:3]), loss="cross_entropy")


def test_hvp_cache_sees_in_place_changes_through_numpy():
    obj = make_objective("tanh-bias-1out")
    theta = obj.theta.clone()
    v = torch.randn(obj.num_params, dtype=torch.float64)
    first = obj.hvp(v, theta)
    theta.numpy()[:] *= 3  # no autograd version bump
    assert torch.allclose(obj.hvp(v, theta), reference_hessian(obj, theta) @ v, rtol=1e-10)
    assert not torch.allclose(first, obj.hvp(v, theta))


def test_inputs_are_read_only_and_batchnorm_batches_of_one_rejected():
    obj = make_objective("relu-bias-1out")
    with pytest.raises(AttributeError):
        obj.inputs = obj.inputs * 2
    model = make_model(bn=True)
    x, y = torch.randn(11, 4, dtype=torch.float64), torch.randn(11, 1, dtype=torch.float64)
    with pytest.raises(ValueError, match="last batch of 1"):
        Objective(model, (x, y), batch_size=5)
