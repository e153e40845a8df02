"""Objective on users' data (#20): loaders, batch weighting, devices, float32, parameter subsets,
callable losses, BatchNorm with running statistics, and the Gauss–Newton operator.

Every streamed quantity is compared with the single-tensor objective, whose products the other
tests check against dense references. Tolerances: two float64 sums of the same terms in another
order differ by a few ulps per term, so 1e-12 relative is a round-off margin, not a model error.
"""

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import evaluators as ev
from evaluators import Objective
from tests.evaluators.conftest import make_model, reference_hessian

RTOL = 1e-12


def _data(n=12, d=4, outputs=1, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g, dtype=torch.float64), torch.randn(
        n, outputs, generator=g, dtype=torch.float64
    )


def _close(a, b, rtol=RTOL):
    a, b = torch.as_tensor(a), torch.as_tensor(b)
    return float((a - b).abs().max()) <= rtol * max(1.0, float(b.abs().max()))


NO_BN = {
    "relu-bias-1out": dict(act="relu", outputs=1),
    "tanh-nobias-3out": dict(act="tanh", bias=False, outputs=3),
    "relu-wide-2out": dict(act="relu", outputs=2, width=20),  # P = 142 > 64: λ1 by Lanczos
}


@pytest.mark.parametrize("case", list(NO_BN))
@pytest.mark.parametrize("batch_size", [4, 5])  # divides n = 12, and leaves a last batch of 2
def test_a_loader_objective_equals_the_tensor_objective(case, batch_size):
    cfg = NO_BN[case]
    model = make_model(**cfg)
    x, y = _data(outputs=cfg["outputs"])
    whole = Objective(model, (x, y))
    loader = Objective(model, DataLoader(TensorDataset(x, y), batch_size=batch_size))
    assert loader.streamed and not whole.streamed and loader.n == 12
    eye = torch.eye(whole.num_params, dtype=torch.float64)
    assert _close(loader.loss(), whole.loss())
    assert _close(loader.grad(), whole.grad())
    assert _close(loader.hvp(eye), whole.hvp(eye))
    assert _close(loader.ggn_vp(eye), whole.ggn_vp(eye))
    assert _close(ev.hessian_trace(loader, method="exact").value, ev.hessian_trace(whole, method="exact").value)
    top = [ev.hessian_top_eigenvalue(o, rtol=1e-12).value for o in (loader, whole)]
    assert _close(top[0], top[1])
    assert loader.error() == pytest.approx(whole.error(), abs=1e-15)


def test_the_loss_is_the_sample_weighted_mean_whatever_the_batching():
    model = make_model()
    x, y = _data()
    losses = Objective(model, (x, y)).per_sample_losses().detach()
    for size in (1, 5, 7, 12):
        assert _close(Objective(model, (x, y), batch_size=size).loss(), losses.mean())
    # the control: the unweighted mean of batch means (a last batch of 2) is another number
    batch_means = torch.stack([part.mean() for part in losses.split(5)]).mean()
    assert not _close(batch_means, losses.mean())


def test_a_list_of_batches_with_batchnorm_equals_the_tensor_batches():
    model = make_model(bn=True)
    x, y = _data()
    batches = [(x[i : i + 4], y[i : i + 4]) for i in range(0, 12, 4)]
    listed, cut = Objective(model, batches), Objective(model, (x, y), batch_size=4)
    v = torch.randn(listed.num_params, dtype=torch.float64)
    assert torch.equal(listed.hvp(v), cut.hvp(v)) and torch.equal(listed.grad(), cut.grad())
    with pytest.raises(ValueError, match="batch of 1"):
        Objective(model, [(x[:11], y[:11]), (x[11:], y[11:])]).loss()


def test_bad_data_is_refused_with_a_clear_error():
    model = make_model()
    x, y = _data()
    with pytest.raises(TypeError, match="iterator"):
        Objective(model, iter([(x, y)]))
    with pytest.raises(ValueError, match="batch_size"):
        Objective(model, [(x, y)], batch_size=4)
    with pytest.raises(ValueError, match="no single inputs"):
        _ = Objective(model, [(x, y)]).inputs
    with pytest.raises(ValueError, match="params"):
        Objective(model, (x, y), params=["no.such"])


def test_everything_lives_on_the_requested_device():
    x, y = _data()
    obj = Objective(make_model(), (x, y), device="cpu")
    assert obj.device == torch.device("cpu") and obj.theta.device == obj.device
    assert obj.hvp(np.ones(obj.num_params)).device == obj.device
    assert next(obj.module.parameters()).device == obj.device


def test_float32_lambda_max_is_within_its_reported_error_of_float64(monkeypatch):
    """The reference is the float64 objective of the same float32-rounded data and weights: the
    certificate covers the float32 arithmetic, not the rounding of the inputs. Its size: float32's
    ε ≈ 6e-8 times the √(terms) ≈ 30 of the sums in one product gives ~2e-6 relative; 1e-5 leaves 5×."""
    model = make_model(outputs=2, width=20).float()
    x, y = (t.float() for t in _data(n=40, outputs=2))
    exact = ev.hessian_top_eigenvalue(Objective(model, (x, y)), rtol=1e-12)
    certified = []
    in_dtype = Objective.in_dtype
    monkeypatch.setattr(Objective, "in_dtype", lambda self, d: certified.append(d) or in_dtype(self, d))
    single = ev.hessian_top_eigenvalue(Objective(model, (x, y), dtype=torch.float32), rtol=1e-6)
    assert certified == [torch.float64]  # the error comes from a float64 product, not the float32 residual
    assert single.precision == "float32" and single.summary()["precision"] == "float32"
    assert "precision" not in exact.summary()  # float64 records keep their fields
    assert abs(single.value - exact.value) <= single.error
    assert single.error < 1e-5 * abs(exact.value)
    hutch = ev.hessian_trace(Objective(model, (x, y), dtype=torch.float32), method="hutch++", samples=30)
    assert hutch.precision == "float32"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_streamed_panel_runs_on_a_cuda_device_from_cpu_batches():
    model = make_model(outputs=2, width=20)
    x, y = _data(n=30, outputs=2)
    loader = DataLoader(TensorDataset(x, y), batch_size=8)  # CPU batches, moved per batch
    here, there = Objective(model, loader), Objective(model, loader, device="cuda")
    assert there.theta.is_cuda and there.hvp(torch.ones(there.num_params)).is_cuda
    for name in ("fisher_rao", "relative_flatness", "adaptive_average", "path_norm", "gauss_newton_top"):
        # smooth in the products (the ascent and bisection measures branch on last-bit comparisons)
        assert SCALE_MEASURES[name](there).value == pytest.approx(SCALE_MEASURES[name](here).value, rel=1e-9), name
    assert ev.hessian_trace(there, method="hutch++", samples=12).value == pytest.approx(
        ev.hessian_trace(here, method="hutch++", samples=12).value, rel=1e-9
    )
    assert np.allclose(
        ev.hessian_spectral_density(there, probes=3, steps=10).density,
        ev.hessian_spectral_density(here, probes=3, steps=10).density,
        rtol=1e-8,
    )
    single = Objective(model, loader, device="cuda", dtype=torch.float32)
    assert abs(ev.hessian_top_eigenvalue(single, rtol=1e-6).value - ev.hessian_top_eigenvalue(here).value) < 1e-3


def test_a_parameter_subset_is_the_hessian_block():
    model = make_model(act="tanh", outputs=2)
    x, y = _data(outputs=2)
    full = Objective(model, (x, y))
    last = Objective(model, (x, y), params=["2.weight", "2.bias"])
    block = torch.cat([torch.arange(full.num_params)[full.param_slice(n)] for n in last.layout.names])
    h = reference_hessian(full)
    assert last.num_params == len(block)
    assert _close(last.grad(), full.grad()[block])
    assert _close(last.hessian(), h[block][:, block], rtol=1e-10)
    assert ev.hessian_trace(last, method="exact").value == pytest.approx(float(h[block, block].sum()), rel=1e-10)


def test_relu_identity_trace_on_a_parameter_subset():
    model = make_model(outputs=2)
    x, y = _data(outputs=2)
    first = Objective(model, (x, y), params=["0.weight"])
    identity = ev.hessian_trace(first, method="exact")
    assert identity.extra["method"] == "gradient-norm identity"
    assert identity.value == pytest.approx(float(torch.trace(reference_hessian(first))), rel=1e-10)


def test_callable_losses_get_their_targets_unchanged():
    model = make_model(outputs=3)
    x, _ = _data()
    labels = torch.tensor([0, 1, 2] * 4)
    named = Objective(model, (x, labels), loss="cross_entropy")
    module = Objective(model, (x, labels), loss=nn.CrossEntropyLoss(reduction="none"))
    assert module.targets.dtype == torch.long and module.loss_name == "CrossEntropyLoss"
    assert _close(module.loss(), named.loss()) and _close(module.grad(), named.grad())
    with pytest.raises(ValueError, match="one value per sample"):
        Objective(model, _data(outputs=3), loss=nn.MSELoss(reduction="none")).loss()


def test_batchnorm_with_running_statistics_is_the_deployed_model():
    model = make_model(bn=True)
    x, y = _data()
    with torch.no_grad():
        model.train()(x * 3 + 1)  # running statistics away from their initial values
    deployed = Objective(model, (x, y), batchnorm="running")
    with torch.no_grad():
        assert torch.allclose(deployed.forward(), model.eval()(x), rtol=1e-14)
    batch = Objective(model, (x, y))
    assert not torch.allclose(deployed.loss(), batch.loss())
    h = deployed.hessian()
    fd = torch.stack(
        [
            (deployed.grad(deployed.theta + 1e-5 * e) - deployed.grad(deployed.theta - 1e-5 * e)) / 2e-5
            for e in torch.eye(len(h), dtype=torch.float64)
        ]
    )
    assert (fd - h).abs().max() <= 1e-6 * h.abs().max()  # central differences, as in test_objective
    untracked = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3, track_running_stats=False)).double()
    with pytest.raises(ValueError, match="running statistics"):
        Objective(untracked, (x, y), batchnorm="running")


def test_no_dense_hessian_above_its_limit_unless_asked():
    obj = Objective(make_model(), _data())
    with pytest.raises(ValueError, match="max_params"):
        obj.hessian(max_params=10)
    assert obj.hessian(max_params=obj.num_params).shape == (obj.num_params, obj.num_params)


def _dense_ggn(obj: Objective) -> torch.Tensor:
    """(1/n) Σ_i J_iᵀ ∇²_f ℓ_i J_i from the dense output Jacobian and the loss's output Hessian."""

    def outputs(t):
        return obj.forward(t).reshape(-1)

    jac = torch.autograd.functional.jacobian(outputs, obj.theta.clone())  # (n·k, P)
    f = obj.forward().detach()

    def summed_loss(out):
        return obj._per_sample(out.reshape(f.shape), obj.targets).sum()

    h_out = torch.autograd.functional.hessian(summed_loss, f.reshape(-1))
    return jac.T @ h_out @ jac / obj.n


@pytest.mark.parametrize("loss", ["mse", "cross_entropy"])
def test_gauss_newton_products_trace_and_top_eigenvalue_match_the_dense_matrix(loss):
    model = make_model(act="tanh", outputs=3)
    x, y = _data(outputs=3)
    targets = y.argmax(dim=1) if loss == "cross_entropy" else y
    obj = Objective(model, (x, targets), loss=loss)
    dense = _dense_ggn(obj)
    eye = torch.eye(obj.num_params, dtype=torch.float64)
    assert _close(obj.ggn_vp(eye), dense, rtol=1e-10)
    assert ev.gauss_newton_trace(obj, method="exact").value == pytest.approx(float(torch.trace(dense)), rel=1e-10)
    top = ev.gauss_newton_top_eigenvalue(obj, rtol=1e-12)
    assert top.value == pytest.approx(float(torch.linalg.eigvalsh(dense)[-1]), rel=1e-10)
    # the control: G is not the Hessian away from interpolation (the residual term is there)
    assert not _close(dense, reference_hessian(obj), rtol=1e-3)


def test_gauss_newton_trace_of_a_relu_mlp_is_the_gradient_norm_identity():
    obj = Objective(make_model(outputs=2), _data(outputs=2))
    identity = ev.gauss_newton_trace(obj)
    assert identity.extra["method"] == "gradient-norm identity"
    assert identity.value == pytest.approx(float(torch.trace(_dense_ggn(obj))), rel=1e-10)


def test_auto_trace_reports_its_choice_and_keeps_to_its_budget():
    tanh = Objective(make_model(act="tanh"), _data())  # no identity; P = 37
    cheap = ev.hessian_trace(tanh, samples=12)
    assert cheap.extra["method"] == "hutch++" and cheap.hvps <= 12 and cheap.extra["auto_budget"] == 12
    dense = ev.hessian_trace(tanh, samples=12, max_hvps=100)
    assert dense.extra["method"] == "dense diagonal" and dense.hvps == tanh.num_params
    relu = ev.hessian_trace(Objective(make_model(), _data()), samples=12)
    assert relu.extra["method"] == "gradient-norm identity" and relu.hvps == 0


def test_symmetry_minimized_trace_takes_an_objective_and_is_invariant_on_its_orbit():
    g = torch.Generator().manual_seed(3)
    net = nn.Sequential(nn.Linear(4, 6, bias=False), nn.ReLU(), nn.Linear(6, 1, bias=False)).double()
    x, y = _data(n=10)
    base = ev.symmetry_minimized_trace(Objective(net, (x, y)))
    a, w = net[2].weight.detach()[0].numpy(), net[0].weight.detach().numpy()
    assert base.value == ev.min_trace_over_rescalings(a, w, x.numpy(), 1.0)
    t = torch.rand(6, generator=g, dtype=torch.float64) * 3 + 0.2
    with torch.no_grad():
        net[0].weight.mul_(t[:, None])
        net[2].weight.div_(t[None, :])
    moved = ev.symmetry_minimized_trace(Objective(net, (x, y)))
    assert moved.value == pytest.approx(base.value, rel=1e-12)
    with pytest.raises(ValueError, match="no parameter"):
        ev.symmetry_minimized_trace(Objective(net, (x, y)), inner="1.weight")


SCALE_MEASURES = {
    "fisher_rao": lambda o: ev.fisher_rao_norm(o),
    "relative_flatness": lambda o: ev.relative_flatness(o, "0.weight"),
    "adaptive_average": lambda o: ev.adaptive_sharpness(o, 0.1, kind="average", samples=20),
    "adaptive_worst": lambda o: ev.adaptive_sharpness(o, 1e-3, norm="linf"),
    "pacbayes": lambda o: ev.pacbayes_flatness(o, metric="loss", samples=8, iterations=12),
    "path_norm": lambda o: ev.path_norm(o),
    "gauss_newton_top": lambda o: ev.gauss_newton_top_eigenvalue(o, rtol=1e-12),
}


@pytest.mark.parametrize("name", list(SCALE_MEASURES))
def test_panel_measures_at_scale_run_on_streamed_batches(name):
    model = make_model(outputs=2, width=20)
    x, y = _data(n=30, outputs=2)
    whole = SCALE_MEASURES[name](Objective(model, (x, y))).value
    streamed = SCALE_MEASURES[name](Objective(model, DataLoader(TensorDataset(x, y), batch_size=8))).value
    assert streamed == pytest.approx(whole, rel=1e-10)


def test_loaders_whose_passes_differ_are_refused():
    """Every evaluator reads the data several times: L must be the same function on each pass."""
    x, y = _data()
    data = TensorDataset(x, y)
    with pytest.raises(ValueError, match="shuffles, and BatchNorm"):
        Objective(make_model(bn=True), DataLoader(data, batch_size=4, shuffle=True))
    with pytest.raises(ValueError, match="drops its last batch"):
        Objective(make_model(), DataLoader(data, batch_size=5, shuffle=True, drop_last=True))
    # the controls: without BatchNorm a shuffled loader gives the same L (a sum in another order),
    # and the deployed BatchNorm model does not couple samples
    shuffled = Objective(make_model(), DataLoader(data, batch_size=4, shuffle=True))
    assert _close(shuffled.loss(), Objective(make_model(), (x, y)).loss())
    Objective(make_model(bn=True), DataLoader(data, batch_size=4, shuffle=True), batchnorm="running")


def test_repeated_parameter_names_and_list_targets():
    x, y = _data(outputs=3)
    with pytest.raises(ValueError, match="more than once"):
        Objective(make_model(), (x, y[:, :1]), params=["0.weight", "0.weight"])
    labels = [0, 1, 2] * 4
    as_list = Objective(make_model(outputs=3), (x, labels), loss="cross_entropy")
    as_tensor = Objective(make_model(outputs=3), (x, torch.tensor(labels)), loss="cross_entropy")
    assert not as_list.streamed and _close(as_list.loss(), as_tensor.loss())


def test_the_gauss_newton_product_checks_its_loss_and_handles_a_linear_one():
    x, y = _data()
    model = make_model()
    batch_mean = Objective(model, (x, y), loss=lambda f, t: ((f - t) ** 2).mean())
    with pytest.raises(ValueError, match="one value per sample"):
        batch_mean.ggn_vp(torch.ones(batch_mean.num_params, dtype=torch.float64))
    linear = Objective(model, (x, y), loss=lambda f, t: (f * t).sum(dim=1))  # ∇²_f ℓ = 0
    v = torch.randn(linear.num_params, dtype=torch.float64)
    assert torch.equal(linear.ggn_vp(v), torch.zeros_like(v))
    assert not torch.equal(linear.hvp(v), torch.zeros_like(v))  # the control: its Hessian is not 0
