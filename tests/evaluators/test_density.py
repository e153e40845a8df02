"""Stochastic Lanczos quadrature against the dense spectrum."""

import numpy as np
import pytest
import torch

import evaluators as ev
from evaluators.density import lanczos_tridiagonal
from tests.evaluators.conftest import make_objective, reference_hessian


def test_quadrature_reproduces_the_probes_moments_exactly():
    """Gauss quadrature with m nodes is exact for polynomials of degree < 2m: Σ τ θ^j = vᵀHʲv."""
    obj = make_objective("tanh-bias-1out")
    h = reference_hessian(obj)
    v = torch.randn(obj.num_params, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    v = v / v.norm()
    alpha, beta = lanczos_tridiagonal(lambda u: h @ u, v, 6)
    nodes, vectors = np.linalg.eigh(np.diag(alpha) + np.diag(beta, 1) + np.diag(beta, -1))
    weights = vectors[0] ** 2
    hv = v.clone()
    for j in range(1, 12):
        hv = h @ hv
        assert float(weights @ nodes**j) == pytest.approx(float(v @ hv), rel=1e-9, abs=1e-12)
    # the control: degree 2m is beyond the rule, and in general no longer exact
    assert float(weights @ nodes**12) != pytest.approx(float(v @ (h @ hv)), rel=1e-9)


def test_slq_density_matches_the_smoothed_dense_spectrum_within_its_error():
    obj = make_objective("relu-deep-3out")
    eig = np.linalg.eigvalsh(reference_hessian(obj).numpy())
    found = ev.hessian_spectral_density(obj, probes=40, steps=obj.num_params, seed=1)
    exact = np.exp(-((found.grid[:, None] - eig[None, :]) ** 2) / (2 * found.sigma**2)).mean(axis=1)
    exact /= found.sigma * np.sqrt(2 * np.pi)
    assert np.all(np.abs(found.density - exact) <= 5 * found.stderr + 1e-9 * exact.max())
    assert np.trapezoid(found.density, found.grid) == pytest.approx(1.0, abs=1e-3)
    assert found.hvps <= 40 * obj.num_params and found.precision == "float64"
    # the control: the density of another matrix is outside those errors
    other = np.exp(-((found.grid[:, None] - 2 * eig[None, :]) ** 2) / (2 * found.sigma**2)).mean(axis=1)
    other /= found.sigma * np.sqrt(2 * np.pi)
    assert np.any(np.abs(found.density - other) > 5 * found.stderr + 1e-9 * exact.max())


@pytest.mark.parametrize("scale", [1e-14, 1.0, 1e8])
def test_lanczos_runs_its_steps_whatever_the_norm(scale):
    """The early stop is relative to T's own scale: a Hessian of norm 1e-14 gets its full run and
    the same nodes, scaled (an absolute floor of 1 stopped it after one step)."""
    obj = make_objective("tanh-bias-1out")
    h = reference_hessian(obj)
    v = torch.randn(obj.num_params, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    alpha, beta = lanczos_tridiagonal(lambda u: scale * (h @ u), v, 8)
    unit_alpha, _ = lanczos_tridiagonal(lambda u: h @ u, v, 8)
    assert len(alpha) == 8
    assert np.allclose(alpha / scale, unit_alpha, rtol=1e-9, atol=1e-12 * np.abs(unit_alpha).max())
    # the control: a rank-2 matrix exhausts its Krylov space after 2 steps, at any scale
    u2 = torch.linalg.qr(torch.randn(obj.num_params, 2, dtype=torch.float64))[0]
    assert len(lanczos_tridiagonal(lambda u: scale * (u2 @ (u2.T @ u)), v, 8)[0]) == 2
