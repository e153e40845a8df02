"""The flattest-interpolator search against the dense float64 Hessian and Wen et al.'s bounds."""

import pytest
import torch

from constructions.specs import XorSpec
from constructions.trace_search import (
    _feature_jacobians,
    feature_gram,
    flattest_output_layer,
    search_flattest_interpolator,
    search_without_interpolation,
)
from constructions.xor import TwoLayerNet, build_xor
from evaluators import Objective, hessian_trace


def _cube(d=3, n=6, seed=0):
    data = build_xor(XorSpec(d=d, n=n), torch.Generator().manual_seed(seed))
    return data.x, data.y


def _bias_bound(x, y):
    """Thm 4.1: (4/n) Σ_i ‖(x_i, 1)‖ |y_i|."""
    return float(4 / len(x) * ((x.pow(2).sum(1) + 1).sqrt() * y.abs()).sum())


@pytest.mark.parametrize("simln_eps", [None, 1.0])
def test_the_flattest_output_layer_interpolates_at_the_dense_hessian_trace(simln_eps):
    x, y = _cube()
    g = torch.Generator().manual_seed(1)
    w, b = torch.randn(10, 3, generator=g, dtype=torch.float64), torch.randn(10, generator=g, dtype=torch.float64)
    a, trace = flattest_output_layer(w, b, x, y, simln_eps)
    net = TwoLayerNet(w, b, a, simln_eps=simln_eps)
    obj = Objective(net, (x, y))
    assert float(obj.loss()) < 1e-24  # an interpolator up to round-off
    # at an interpolator the dense Hessian's trace is the Gauss–Newton trace; 1e-9: the ridge's O(1e-12 ‖a‖²)
    assert float(trace) == pytest.approx(hessian_trace(obj, method="exact").value, rel=1e-9)


def test_the_flattest_output_layer_is_the_constrained_minimum():
    """Moving a inside the null space of Φ keeps interpolation and never lowers the trace."""
    x, y = _cube()
    g = torch.Generator().manual_seed(2)
    w, b = torch.randn(10, 3, generator=g, dtype=torch.float64), torch.randn(10, generator=g, dtype=torch.float64)
    a, trace = flattest_output_layer(w, b, x, y)
    phi = torch.relu(x @ w.T + b)
    null = torch.linalg.svd(phi).Vh[len(x) :]  # rows span {v: Φv = 0}
    for k in range(len(null)):
        moved = TwoLayerNet(w, b, a + 0.1 * null[k])
        assert hessian_trace(Objective(moved, (x, y)), method="exact").value >= float(trace) - 1e-9


def test_no_interpolator_found_is_flatter_than_the_bias_bound_but_the_unconstrained_search_is():
    x, y = _cube()
    bound = _bias_bound(x, y)
    found = search_flattest_interpolator(
        x, y, 8, random_starts=3, generator=torch.Generator().manual_seed(3), steps=100
    )
    assert found.residual <= 1e-20 and found.starts == 3 and len(found.trace_per_start) == 3
    net = TwoLayerNet(found.w, found.b, found.a)
    assert found.smallest_trace == pytest.approx(hessian_trace(Objective(net, (x, y)), method="exact").value, rel=1e-9)
    assert found.smallest_trace >= bound - 1e-9
    # the control: without the constraint the same descent goes far below the bound
    assert search_without_interpolation(x, y, 8, generator=torch.Generator().manual_seed(4), steps=100) < bound / 2


@pytest.mark.parametrize("simln_eps", [None, 1.0, 50.0])  # Sim-LN with ‖h‖ > ϵ and with ‖h‖ < ϵ
def test_the_closed_form_gram_is_the_per_sample_jacobians(simln_eps):
    """Φ and M = Σ_i J_iᵀJ_i in closed form equal those from torch.func's per-sample Jacobians."""
    x, _ = _cube()
    g = torch.Generator().manual_seed(5)
    w, b = torch.randn(9, 3, generator=g, dtype=torch.float64), torch.randn(9, generator=g, dtype=torch.float64)
    phi, gram = feature_gram(w, b, x, simln_eps)
    phi_ref, jac = _feature_jacobians(w, b, x, simln_eps)
    assert torch.allclose(phi, phi_ref, rtol=1e-14, atol=1e-15)
    assert torch.allclose(gram, torch.einsum("ipk,ipl->kl", jac, jac), rtol=1e-12, atol=1e-14)
