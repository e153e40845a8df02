"""Relative flatness, Fisher–Rao, PAC-Bayes flatness and the norm baselines against references."""

import itertools

import pytest
import torch
from torch import nn

from evaluators import (
    Objective,
    fisher_rao_norm,
    pacbayes_flatness,
    parameter_norm,
    path_norm,
    relative_flatness,
    spectral_norm_product,
)
from tests.evaluators.conftest import make_objective, reference_hessian


@pytest.mark.parametrize("case", ["relu-bias-1out", "tanh-nobias-3out", "relu-batchnorm-1out"])
@pytest.mark.parametrize("layer", ["first", "last"])
def test_relative_flatness_matches_dense(case, layer):
    obj = make_objective(case)
    weights = obj.parameter_groups()["weights"]
    name = weights[0] if layer == "first" else weights[-1]
    sl = obj.param_slice(name)
    shape = obj.layout.shapes[obj.layout.names.index(name)]
    w = obj.theta[sl].view(shape)
    block = reference_hessian(obj)[sl, sl].reshape(*shape, *shape)  # [s, k, s', k']
    expected = sum(
        float(w[s] @ w[t]) * float(torch.diagonal(block[s, :, t, :]).sum())
        for s, t in itertools.product(range(shape[0]), repeat=2)
    )
    assert relative_flatness(obj, name).value == pytest.approx(expected, rel=1e-10)


def test_fisher_rao_matches_per_sample_gradients(case):
    obj = make_objective(case)
    expected = 0.0
    for i in range(obj.n):
        theta = obj.theta.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(obj.per_sample_losses(theta)[i], theta)
        expected += float(obj.theta @ g) ** 2 / obj.n
    assert fisher_rao_norm(obj).value == pytest.approx(expected, rel=1e-10)


def test_fisher_rao_homogeneous_identity():
    # Bias-free ReLU net with L+1 = 2 layers: ⟨θ, ∇f⟩ = 2f, so ⟨θ, ∇ℓ⟩ = 2·2(f − y)·f for MSE.
    obj = make_objective("relu-nobias-2out")
    with torch.no_grad():
        f = obj.forward()
    expected = ((2 * 2 * (f - obj.targets) * f).sum(dim=1) ** 2).mean()
    assert fisher_rao_norm(obj).value == pytest.approx(float(expected), rel=1e-10)


def test_pacbayes_loss_metric_matches_quadratic_closed_form():
    # Linear least squares is exactly quadratic: mean_j L(θ + σz_j) − L(θ) = σ a + σ² b.
    g = torch.Generator().manual_seed(2)
    x = torch.randn(30, 5, generator=g, dtype=torch.float64)
    obj = Objective(nn.Linear(5, 1, bias=False), (x, torch.randn(30, generator=g, dtype=torch.float64)))
    est = pacbayes_flatness(obj, metric="loss", target=0.1, samples=16, seed=3, iterations=60)
    z = torch.randn(16, obj.num_params, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    grad, hess = obj.grad(), reference_hessian(obj)
    a = float((z @ grad).mean())
    b = float(((z @ hess) * z).sum(dim=1).mean()) / 2
    sigma = (-a + (a * a + 4 * b * 0.1) ** 0.5) / (2 * b)
    assert est.extra["sigma"] == pytest.approx(sigma, rel=1e-6)
    assert est.interval[0] <= 1 / sigma**2 <= est.interval[1] * (1 + 1e-9)
    assert est.extra["deviation"] <= 0.1 + 1e-12


def test_pacbayes_magnitude_aware_and_error_metric():
    base = make_objective("relu-bias-1out", n=40)
    with torch.no_grad():
        obj = Objective(base.module, (base.inputs, base.forward()))  # zero training error by construction
    plain = pacbayes_flatness(obj, samples=8)
    aware = pacbayes_flatness(obj, magnitude_aware=True, samples=8)
    for est in (plain, aware):
        assert est.converged and est.value > 0 and est.extra["deviation"] <= 0.1 + 1e-12
        assert est.interval[0] <= est.value and est.interval[1] == est.value


def test_norm_baselines():
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(3, 4, bias=False), nn.ReLU(), nn.Linear(4, 2, bias=False)).double()
    obj = Objective(model, (torch.randn(5, 3, dtype=torch.float64), torch.randn(5, 2, dtype=torch.float64)))
    w1, w2 = model[0].weight.detach(), model[2].weight.detach()
    paths = sum(float(w2[o, h] * w1[h, i]) ** 2 for o, h, i in itertools.product(range(2), range(4), range(3)))
    assert path_norm(obj).value == pytest.approx(paths**0.5, rel=1e-12)
    assert spectral_norm_product(obj).value == pytest.approx(
        float(torch.linalg.svdvals(w1)[0] * torch.linalg.svdvals(w2)[0]), rel=1e-12
    )
    assert parameter_norm(obj).value == pytest.approx(float(obj.theta.norm()), rel=1e-14)


def test_pacbayes_reports_a_one_sided_interval_when_the_target_is_never_crossed():
    obj = make_objective("relu-bias-1out", n=20)  # random targets: the 0-1 error is already ~0.5
    est = pacbayes_flatness(obj, samples=4, sigma_max=1e-3)
    assert not est.converged
    assert est.interval == (0.0, pytest.approx(1e6))


@pytest.mark.parametrize("case", ["relu-bias-1out", "tanh-nobias-3out"])
def test_relative_flatness_layer_input_path_equals_column_path(case):
    # Without BatchNorm a Linear weight takes the one-product-per-neuron path; the (in_features)²
    # quadratic forms it replaces must give the same number (to round-off of the summation order).
    from evaluators.relative_flatness import _relative_flatness_by_columns

    obj = make_objective(case)
    for name in obj.parameter_groups()["weights"]:
        shape = obj.layout.shapes[obj.layout.names.index(name)]
        est = relative_flatness(obj, name)
        assert est.hvps == shape[0]
        sl = obj.param_slice(name)
        by_columns = _relative_flatness_by_columns(obj, obj.theta, sl, obj.theta[sl].view(shape))
        assert est.value == pytest.approx(by_columns, rel=1e-12)
