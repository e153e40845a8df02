"""Traces: the exact identity against the dense trace; stochastic intervals cover the truth."""

import numpy as np
import pytest
import torch
from torch import nn

from evaluators import Objective, hessian_trace, relu_mlp_gradient_norms, supports_exact_identity
from tests.evaluators.conftest import make_objective, reference_hessian

EXACT_RTOL = 1e-9


def test_exact_trace_matches_dense(case):
    obj = make_objective(case)
    true = torch.trace(reference_hessian(obj)).item()
    est = hessian_trace(obj, method="exact")
    assert est.error_kind == "exact"
    assert abs(est.value - true) <= EXACT_RTOL * abs(true)
    expected_path = "gradient-norm identity" if "relu" in case and "batchnorm" not in case else "dense diagonal"
    assert est.extra["method"] == expected_path


def test_identity_applies_only_where_it_holds():
    assert supports_exact_identity(make_objective("relu-deep-3out"))
    assert not supports_exact_identity(make_objective("tanh-bias-1out"))
    assert not supports_exact_identity(make_objective("relu-batchnorm-1out"))


def test_gradient_norms_match_per_sample_jacobians():
    obj = make_objective("relu-deep-3out", n=5)
    norms = relu_mlp_gradient_norms(obj)
    for i in range(obj.n):
        x_i = obj.inputs[i : i + 1]
        jac = torch.autograd.functional.jacobian(lambda t, x_i=x_i: obj.forward(t, x_i)[0], obj.theta)
        assert torch.allclose(norms[i], (jac**2).sum(), rtol=1e-12)


@pytest.mark.parametrize("method, samples", [("hutchinson", 100), ("hutch++", 99)])
def test_stochastic_interval_coverage(method, samples):
    obj = make_objective("tanh-bias-1out", n=16)
    true = torch.trace(reference_hessian(obj)).item()
    hits = 0
    for seed in range(50):
        est = hessian_trace(obj, method=method, samples=samples, seed=seed)
        assert est.error_kind == "stderr" and est.hvps == samples
        lo, hi = est.interval
        hits += lo <= true <= hi
    assert hits >= 45  # ≥ 90% of 50 seeds (nominal 95%)


def test_hutch_plus_plus_beats_hutchinson_on_low_rank_hessian():
    # Linear least squares: H = (2/n) XᵀX has rank n = 8 < the 20 sketch vectors, so Hutch++'s
    # deflated part is zero and only round-off remains.
    x = torch.randn(8, 60, dtype=torch.float64)
    obj = Objective(nn.Linear(60, 1, bias=False), (x, torch.randn(8, dtype=torch.float64)))
    true = torch.trace(reference_hessian(obj)).item()
    err = {
        m: np.mean([abs(hessian_trace(obj, method=m, samples=60, seed=s).value - true) for s in range(20)])
        for m in ("hutchinson", "hutch++")
    }
    assert err["hutch++"] < err["hutchinson"] / 3
    assert err["hutch++"] < 1e-10 * true


def test_seeded_and_reproducible():
    obj = make_objective("tanh-bias-1out")
    a = hessian_trace(obj, method="hutch++", samples=30, seed=7)
    b = hessian_trace(obj, method="hutch++", samples=30, seed=7)
    assert a.value == b.value and a.error == b.error


def test_bad_method():
    with pytest.raises(ValueError, match="method"):
        hessian_trace(make_objective("relu-bias-1out"), method="exact-ish")


def test_identity_with_activation_after_output_and_leaky_relu():
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(4, 6), nn.LeakyReLU(0.1), nn.Linear(6, 2), nn.ReLU()).double()
    x = torch.randn(10, 4, dtype=torch.float64)
    obj = Objective(model, (x, torch.randn(10, 2, dtype=torch.float64)))
    true = torch.trace(reference_hessian(obj)).item()
    est = hessian_trace(obj, method="exact")
    assert est.extra["method"] == "gradient-norm identity"
    assert abs(est.value - true) <= EXACT_RTOL * abs(true)


def test_a_callable_named_mse_is_not_taken_for_the_builtin():
    base = make_objective("relu-bias-1out")

    def mse(out, y):  # half the built-in loss: the identity's factor 2/n would be wrong
        return 0.5 * ((out - y.reshape(out.shape)) ** 2).sum(dim=1)

    obj = Objective(base.module, (base.inputs, base.targets), loss=mse)
    assert not supports_exact_identity(obj)
    assert hessian_trace(obj, method="exact").value == pytest.approx(
        torch.trace(reference_hessian(obj)).item(), rel=1e-9
    )


def test_auto_with_batch_size_uses_a_method_that_applies():
    base = make_objective("relu-bias-1out", n=12)
    obj = Objective(base.module, (base.inputs, base.targets), batch_size=4)
    est = hessian_trace(obj, method="auto")
    assert est.value == pytest.approx(torch.trace(reference_hessian(obj)).item(), rel=1e-9)


def test_float32_traces_are_widened_by_their_measured_round_off():
    """Hutch++ with 3P products spans the whole space, so its sampling error is only round-off: in
    float32 the error bar must then come from the measured round-off (the forms recomputed in
    float64), and cover the float64 trace of the same rounded model and data."""
    model = make_objective("tanh-bias-1out", n=16).module.float()
    g = torch.Generator().manual_seed(5)
    x, y = torch.randn(16, 4, generator=g), torch.randn(16, 1, generator=g)
    single = Objective(model, (x, y), dtype=torch.float32)
    double = Objective(model, (x, y))
    true = torch.trace(reference_hessian(double)).item()
    p = single.num_params
    uncovered_by_stderr = 0
    for seed in range(10):
        est = hessian_trace(single, method="hutch++", samples=3 * p, seed=seed)
        assert est.precision == "float32" and est.extra["rounding"] > 0
        assert abs(est.value - true) <= est.error
        assert est.interval[0] <= true <= est.interval[1]
        uncovered_by_stderr += abs(est.value - true) > est.error - est.extra["rounding"]
    # the control: the stderr alone (what float64 reports) misses the float32 value at most seeds
    assert uncovered_by_stderr >= 5
    hutchinson = hessian_trace(single, method="hutchinson", samples=20)
    assert hutchinson.extra["rounding"] > 0 and hutchinson.precision == "float32"
    exact = hessian_trace(single, method="exact")  # the dense diagonal, recomputed in float64
    assert 0 < exact.error < 1e-4 * abs(true) and abs(exact.value - true) <= exact.error + 1e-12 * abs(true)
    assert "rounding" not in hessian_trace(double, method="hutch++", samples=3 * p).extra
