"""The sharpness-reduction flow on BN regression: Γ, λ1 on Γ against the dense Hessian, the flow's direction."""

import numpy as np
import pytest
import torch

from constructions.bn_regression import build_bn_regression, cosine_to_min_norm, spherical_sharpness_per_row
from constructions.sharpness_flow import (
    centred_inputs,
    edge_initialization,
    flow_velocity,
    gd_weight_decay_directions,
    manifold_point,
    manifold_projector,
    sharpness_on_manifold,
    sharpness_reduction_flow,
)
from constructions.specs import BNLinearRegressionSpec


@pytest.fixture(scope="module")
def setting():
    problem = build_bn_regression(BNLinearRegressionSpec(n=8, d=20), torch.Generator().manual_seed(4))
    projector = manifold_projector(problem)
    return problem, projector, manifold_point(problem, projector, torch.Generator().manual_seed(5))


def test_manifold_points_interpolate(setting):
    problem, projector, z = setting
    torch.testing.assert_close(projector @ projector, projector, rtol=0, atol=1e-12)
    torch.testing.assert_close(projector, projector.T, rtol=0, atol=1e-12)
    assert float(z.norm()) == pytest.approx(1.0, abs=1e-14)
    assert float(problem.loss(z)) < 1e-24  # zero loss up to round-off (targets are O(1))


def test_sharpness_on_manifold_is_the_dense_hessians(setting):
    problem, _, z = setting
    # Gauss–Newton = Hessian at zero residual; the dense float64 eigvalsh agrees to round-off
    assert sharpness_on_manifold(problem, z) == pytest.approx(
        float(spherical_sharpness_per_row(problem, z[None])[0]), rel=1e-9
    )


def test_flow_velocity_is_minus_the_tangent_gradient_of_log_sharpness(setting):
    problem, projector, z = setting
    v = flow_velocity(centred_inputs(problem)[0], projector, z)
    torch.testing.assert_close(projector @ v, v, rtol=0, atol=1e-12)
    assert abs(float(v @ z)) < 1e-12
    # the tangent gradient of log λ1 by central differences along an orthonormal basis of T = S ∩ z^⊥
    tangent = projector - torch.outer(z, z)
    values, vectors = torch.linalg.eigh(tangent)
    basis = vectors[:, values > 0.5].T
    h = 1e-6  # O(h²) truncation ≈ 1e-12 against round-off ≈ 1e-16/h in log λ1

    def log_lam(w):
        w = projector @ w
        return np.log(sharpness_on_manifold(problem, w / w.norm()))

    g = sum((log_lam(z + h * e) - log_lam(z - h * e)) / (2 * h) * e for e in basis)
    torch.testing.assert_close(v, -2 * g / (4 + g @ g), rtol=1e-6, atol=1e-9)


def test_the_flow_lowers_sharpness_towards_the_min_norm_direction(setting):
    problem, _, z = setting
    taus, path = sharpness_reduction_flow(problem, z, t_end=6.0, dtau=5e-3)
    lams = np.array([sharpness_on_manifold(problem, p) for p in path[::40]])
    assert taus[-1] == pytest.approx(6.0) and np.all(np.diff(lams) < 0)
    assert float(problem.loss(path[-1])) < 1e-24  # the retraction keeps it on Γ
    assert float(cosine_to_min_norm(problem, path[-1:])[0]) > 0.999  # Thm 5.1: the limit is the min-norm one


def test_edge_initialization_and_the_logged_directions(setting):
    problem, _, z = setting
    lr, wd = 0.1, 1e-3
    w0 = edge_initialization(problem, z, lr, wd, 0.0, torch.Generator().manual_seed(0))
    eff_lr = lr / ((1 - lr * wd) * float(w0.norm()) ** 2)
    assert eff_lr * sharpness_on_manifold(problem, z) == pytest.approx(2.0, rel=1e-12)
    steps, thetas = gd_weight_decay_directions(problem, w0, lr=lr, weight_decay=wd, steps=5, every=2)
    assert list(steps) == [0, 2, 4, 5]
    w = w0.clone()
    for _ in range(2):
        w = (1 - lr * wd) * w - lr * problem.loss_and_grad(w)[1]
    torch.testing.assert_close(thetas[1], w / w.norm(), rtol=1e-13, atol=1e-15)
