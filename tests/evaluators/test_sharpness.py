"""ε-sharpness and adaptive sharpness against brute force on a 2-parameter problem."""

import itertools

import numpy as np
import pytest
import torch
from torch import nn

from evaluators import Objective, adaptive_sharpness, epsilon_sharpness, spherical_sharpness
from tests.evaluators.conftest import make_model, reference_hessian

GRID = 601  # grid spacing 2ε/600: a second-order-small miss of the true max, below REL_TOL
REL_TOL = 2e-3


class TwoParam(nn.Module):
    """f(x) = w2 · tanh(w1 · x): two parameters, a curved, non-quadratic loss."""

    def __init__(self):
        super().__init__()
        self.w1 = nn.Parameter(torch.tensor(0.7, dtype=torch.float64))
        self.w2 = nn.Parameter(torch.tensor(-1.3, dtype=torch.float64))

    def forward(self, x):
        return self.w2 * torch.tanh(self.w1 * x[:, 0])


@pytest.fixture
def two_param() -> Objective:
    g = torch.Generator().manual_seed(5)
    x = torch.randn(20, 1, generator=g, dtype=torch.float64)
    y = torch.sin(2 * x[:, 0])
    return Objective(TwoParam(), (x, y))


def grid_max(obj: Objective, offsets: np.ndarray) -> float:
    """max over ``θ + offsets`` of the closed-form loss of :class:`TwoParam`, vectorized."""
    w = obj.theta.numpy() + offsets  # (k, 2)
    x, y = obj.inputs[:, 0].numpy(), obj.targets.numpy()
    pred = w[:, 1:2] * np.tanh(w[:, 0:1] * x[None, :])
    return float(((pred - y[None, :]) ** 2).mean(axis=1).max())


def box_grid(half: np.ndarray) -> np.ndarray:
    axes = [np.linspace(-h, h, GRID) for h in half]
    return np.array(list(itertools.product(*axes)))


@pytest.mark.parametrize("eps", [1e-3, 5e-2, 0.3])
def test_keskar_box_matches_brute_force(two_param, eps):
    obj = two_param
    base = float(obj.loss())
    half = eps * (obj.theta.abs().numpy() + 1)
    brute = 100 * (grid_max(obj, box_grid(half)) - base) / (1 + base)
    est = epsilon_sharpness(obj, eps)
    assert est.error_kind == "lower_bound"
    assert (
        est.value <= brute * (1 + REL_TOL) + 1e-12
    )  # a lower bound cannot beat the true max by more than the grid's miss
    assert est.value >= brute * (1 - REL_TOL)
    assert np.all(np.abs(est.extra["maximizer"]) <= half * (1 + 1e-12))


def test_ball_region_matches_brute_force(two_param):
    obj, eps = two_param, 0.05
    base = float(obj.loss())
    radius = eps * (float(obj.theta.norm()) + 1)
    angles = np.linspace(0, 2 * np.pi, 4001)
    rim = radius * np.stack([np.cos(angles), np.sin(angles)], axis=1)
    inner = box_grid(np.array([radius, radius]))
    inner = inner[np.linalg.norm(inner, axis=1) <= radius]
    brute = 100 * (grid_max(obj, np.concatenate([rim, inner[::7]])) - base) / (1 + base)
    est = epsilon_sharpness(obj, eps, region="ball", maxiter=200)
    assert brute * (1 - REL_TOL) <= est.value <= brute * (1 + REL_TOL)


@pytest.mark.parametrize("norm", ["linf", "l2"])
@pytest.mark.parametrize("scale", ["abs", "ones"])
def test_adaptive_worst_matches_brute_force(two_param, norm, scale):
    obj, rho = two_param, 0.1
    base = float(obj.loss())
    c = obj.theta.abs().numpy() if scale == "abs" else np.ones(2)
    u = box_grid(np.array([rho, rho]))
    if norm == "l2":
        angles = np.linspace(0, 2 * np.pi, 4001)
        u = np.concatenate(
            [
                u[np.linalg.norm(u, axis=1) <= rho][::5],
                rho * np.stack([np.cos(angles), np.sin(angles)], 1),
            ]
        )
    brute = grid_max(obj, u * c) - base
    est = adaptive_sharpness(obj, rho, norm=norm, scale=scale, steps=100)
    assert brute * (1 - REL_TOL) <= est.value <= brute * (1 + REL_TOL)


def test_adaptive_average_interval_covers_quadrature(two_param):
    obj, rho = two_param, 0.2
    base = float(obj.loss())
    nodes, weights = np.polynomial.hermite_e.hermegauss(60)  # ∫ g(z) φ(z) dz for z ~ N(0, 1)
    weights = weights / weights.sum()
    c = obj.theta.abs().numpy()
    with torch.no_grad():
        exact = (
            sum(
                wi * wj * float(obj.loss(obj.theta + torch.tensor(rho * c * [zi, zj])))
                for (zi, wi), (zj, wj) in itertools.product(zip(nodes, weights, strict=True), repeat=2)
            )
            - base
        )
    hits = sum(
        est.interval[0] <= exact <= est.interval[1]
        for est in (adaptive_sharpness(obj, rho, kind="average", samples=200, seed=s) for s in range(40))
    )
    assert hits >= 36


def test_adaptive_abs_scale_is_invariant_under_layer_rescaling():
    model = make_model(act="relu", bias=True, outputs=1, d=4, width=6)
    x, y = torch.randn(16, 4, dtype=torch.float64), torch.randn(16, 1, dtype=torch.float64)
    obj = Objective(model, (x, y))
    alpha = 7.0
    theta = obj.theta.clone()
    for name, factor in (("0.weight", alpha), ("0.bias", alpha), ("2.weight", 1 / alpha)):
        theta[obj.param_slice(name)] *= factor
    for kind in ("worst", "average"):
        a = adaptive_sharpness(obj, 0.05, kind=kind, seed=1).value
        b = adaptive_sharpness(obj, 0.05, kind=kind, seed=1, theta=theta).value
        assert b == pytest.approx(a, rel=1e-9)
    asam_a = adaptive_sharpness(obj, 0.05, scale="abs+eta").value
    asam_b = adaptive_sharpness(obj, 0.05, scale="abs+eta", theta=theta).value
    assert abs(asam_b / asam_a - 1) > 1e-3  # identity scale on biases breaks invariance under T_α


def test_adaptive_batches_average_per_batch_values(two_param):
    whole = [adaptive_sharpness(two_param.subset(idx), 0.1).value for idx in torch.arange(20).split(8)]
    batched = adaptive_sharpness(two_param, 0.1, batch_size=8)
    assert batched.value == pytest.approx(np.mean(whole), rel=1e-12)


def test_spherical_sharpness_is_lambda1_on_the_sphere():
    model = make_model(bn=True, width=5)
    x, y = torch.randn(12, 4, dtype=torch.float64), torch.randn(12, 1, dtype=torch.float64)
    obj = Objective(model, (x, y))
    names = ["0.weight", "0.bias"]
    idx = torch.cat([torch.arange(obj.num_params)[obj.param_slice(n)] for n in names])
    theta = obj.theta.clone()
    theta[idx] /= theta[idx].norm()
    block = reference_hessian(obj, theta)[idx][:, idx]
    est = spherical_sharpness(obj, params=names)
    assert est.value == pytest.approx(torch.linalg.eigvalsh(block)[-1].item(), rel=1e-8)
    scaled = obj.theta.clone()
    scaled[idx] *= 13.0
    assert spherical_sharpness(obj, params=names, theta=scaled).value == pytest.approx(est.value, rel=1e-8)


def test_argument_errors(two_param):
    with pytest.raises(ValueError, match="eps"):
        epsilon_sharpness(two_param, 0.0)
    with pytest.raises(ValueError, match="region"):
        epsilon_sharpness(two_param, 0.1, region="cube")
    with pytest.raises(ValueError, match="norm"):
        adaptive_sharpness(two_param, 0.1, norm="l1")
    with pytest.raises(ValueError, match="scale"):
        adaptive_sharpness(two_param, 0.1, scale="log")
