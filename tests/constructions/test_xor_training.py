"""Batched 1-SAM / GD+WD on the XOR nets against per-run autograd references (float64)."""

import math

import pytest
import torch

from constructions.sam_steps import simbn_grads
from constructions.specs import XorSpec
from constructions.xor import build_xor, simln_memorizer
from constructions.xor_training import (
    ARCHITECTURES,
    Phase,
    TrainingState,
    XorNets,
    gauss_newton_trace,
    gd_weight_decay_step,
    init_xor_nets,
    log_epochs,
    neuron_alignment,
    sam_epoch,
    sam_step_autograd,
    simbn_step_autograd,
    train_xor,
    xor_outputs,
)
from evaluators import Objective

RUNS, WIDTH, D, N = 3, 7, 6, 20


@pytest.fixture
def data(gen):
    return build_xor(XorSpec(d=D, n=N), gen)


def _stacked(modules, name):
    return torch.stack([getattr(m, name).detach() for m in modules])


def _assert_same(nets: XorNets, modules, rtol):
    for name, t in zip(("w1", "b1", "w2", "gamma"), (nets.w1, nets.b1, nets.w2, nets.gamma), strict=True):
        if t is not None:
            torch.testing.assert_close(t, _stacked(modules, name), rtol=rtol, atol=rtol)


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_outputs_match_the_module(arch, data, gen):
    nets = init_xor_nets(arch, RUNS, WIDTH, D, gen)
    with torch.no_grad():
        ref = torch.stack([nets.module(r)(data.x) for r in range(RUNS)])
    torch.testing.assert_close(xor_outputs(nets, data.x), ref, rtol=0, atol=1e-13)


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_batched_sam_epoch_matches_the_autograd_loop(arch, data, gen):
    """Two epochs of batched 1-SAM equal per-run autograd steps in the same order.

    The two differ only in the order of float64 operations; over 40 steps with weights of size ~10 the
    roundoff measured ≲ 2e-11 absolute (3e-13 relative), so 1e-10 leaves margin and still catches any
    wrong term (those show at 1e-3 after one step).
    """
    nets = init_xor_nets(arch, RUNS, WIDTH, D, gen, first_layer_scale=2.0)
    modules = [nets.module(r) for r in range(RUNS)]
    order_gen, replay_gen = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    for _ in range(2):
        sam_epoch(nets, data.x, data.y, lr=0.05, rho=0.1, generator=order_gen)
        order = torch.argsort(torch.rand(RUNS, N, generator=replay_gen), dim=1)
        for t in range(N):
            for r, m in enumerate(modules):
                sam_step_autograd(m, data.x, data.y, int(order[r, t]), lr=0.05, rho=0.1)
    _assert_same(nets, modules, rtol=1e-10)


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_gd_weight_decay_step_matches_the_objective_gradient(arch, data, gen):
    nets = init_xor_nets(arch, RUNS, WIDTH, D, gen)
    expected = []
    for r in range(RUNS):
        obj = Objective(nets.module(r), (data.x, data.y))
        expected.append(obj.unflatten(obj.theta - 0.1 * (obj.grad() + 0.05 * obj.theta)))
    gd_weight_decay_step(nets, data.x, data.y, lr=0.1, weight_decay=0.05)
    for name, t in zip(("w1", "b1", "w2", "gamma"), (nets.w1, nets.b1, nets.w2, nets.gamma), strict=True):
        if t is not None:
            torch.testing.assert_close(t, torch.stack([e[name] for e in expected]), rtol=0, atol=1e-13)


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_gauss_newton_trace_matches_the_dense_jacobian(arch, data, gen):
    nets = init_xor_nets(arch, RUNS, WIDTH, D, gen)
    gn = gauss_newton_trace(nets, data.x)
    for r in range(RUNS):
        obj = Objective(nets.module(r), (data.x, data.y))
        jac = torch.autograd.functional.jacobian(obj.forward, obj.theta)
        torch.testing.assert_close(gn[r], 2.0 / N * jac.pow(2).sum(), rtol=1e-12, atol=0)
        if arch in ("nobias", "bias"):  # f bilinear per activation pattern: GN trace = Hessian trace everywhere
            torch.testing.assert_close(gn[r], torch.trace(obj.hessian()), rtol=1e-10, atol=0)


def test_gauss_newton_trace_is_the_hessian_trace_at_an_interpolator(data):
    net = simln_memorizer(data)
    nets = XorNets("simln", net.w1.detach()[None], net.b1.detach()[None], net.w2.detach()[None], None, net.simln_eps)
    hess = Objective(net, (data.x, data.y)).hessian()
    torch.testing.assert_close(gauss_newton_trace(nets, data.x)[0], torch.trace(hess), rtol=1e-10, atol=0)


def test_simbn_hessian_reference_agrees_with_finite_differences(data, gen):
    """The Objective's autograd Hessian through Sim-BN vs central differences of its gradient.

    Step 1e-5 gives truncation O(h²·‖∇³L‖) ≈ 1e-10 and roundoff O(ε/h) ≈ 1e-11 per entry; 1e-6 relative
    on the trace leaves two orders of margin.
    """
    nets = init_xor_nets("simbn", 1, WIDTH, D, gen)
    obj = Objective(nets.module(0), (data.x, data.y))
    h, theta = 1e-5, obj.theta
    eye = torch.eye(obj.num_params, dtype=torch.float64)
    fd = torch.stack([(obj.grad(theta + h * e) - obj.grad(theta - h * e)) / (2 * h) for e in eye])
    torch.testing.assert_close(torch.trace(obj.hessian()), torch.trace(fd), rtol=1e-6, atol=0)
    torch.testing.assert_close(obj.hessian(), (fd + fd.T) / 2, rtol=0, atol=1e-5)


def test_simbn_test_points_use_training_statistics(data, gen):
    nets = init_xor_nets("simbn", 2, WIDTH, D, gen)
    x_test, _ = data.sample(7, gen)
    both = torch.cat([data.x, x_test])
    with torch.no_grad():
        joint = xor_outputs(nets, both, reference=data.x)
        torch.testing.assert_close(joint[:, :N], xor_outputs(nets, data.x), rtol=0, atol=1e-13)
        torch.testing.assert_close(joint[:, N:], xor_outputs(nets, x_test, reference=data.x), rtol=0, atol=1e-13)


def test_neuron_alignment_is_one_for_neurons_on_the_first_two_coordinates(gen):
    nets = init_xor_nets("nobias", 2, WIDTH, D, gen)
    assert float(neuron_alignment(nets).max()) < 1
    nets.w1[:, :, 2:] = 0
    torch.testing.assert_close(neuron_alignment(nets), torch.ones(2, dtype=torch.float64))


def test_train_xor_logs_curves_and_is_reproducible(data, gen):
    x_test, y_test = data.sample(50, gen)

    def run(seed):
        nets = init_xor_nets("bias", 2, WIDTH, D, torch.Generator().manual_seed(seed))
        return train_xor(
            nets,
            data.x,
            data.y,
            x_test,
            y_test,
            method="sam",
            phases=[Phase(3, 0.05, 0.05), Phase(3, 0.05, 0.1)],
            generator=torch.Generator().manual_seed(seed),
            log_points=4,
        )

    a, b = run(1), run(1)
    assert a.epochs == log_epochs(6, 4) and a.epochs[0] == 0 and a.epochs[-1] == 6
    assert a.train_loss.shape == (2, len(a.epochs)) and a.steps == 6 * N
    for field in ("train_loss", "trace", "test_error", "test_mse", "alignment"):
        assert torch.equal(getattr(a, field), getattr(b, field))
    assert not torch.equal(a.train_loss, run(2).train_loss)
    assert float(a.train_loss[:, -1].max()) < float(a.train_loss[:, 0].min())


def test_unknown_architecture_is_rejected(gen):
    with pytest.raises(ValueError, match="arch must be one of"):
        init_xor_nets("resnet", 1, 2, 2, gen)


def test_logged_evaluator_trace_agrees_with_the_gauss_newton_trace(data, gen):
    """For the bias net GN = Tr ∇²L everywhere, so Hutch++ must agree within its error bar (5 stderr)."""
    x_test, y_test = data.sample(20, gen)
    nets = init_xor_nets("bias", 1, WIDTH, D, gen)
    log = train_xor(
        nets,
        data.x,
        data.y,
        x_test,
        y_test,
        method="gd",
        phases=[Phase(3, 0.05)],
        generator=gen,
        log_points=2,
        hessian_samples=30,
    )
    assert torch.all(log.hessian_trace_stderr > 0)
    assert torch.all((log.hessian_trace - log.trace[0]).abs() <= 5 * log.hessian_trace_stderr + 1e-9)
    off = train_xor(nets, data.x, data.y, x_test, y_test, method="gd", phases=[Phase(1, 0.05)], generator=gen)
    assert torch.isnan(off.hessian_trace).all()


@pytest.mark.parametrize("arch", ["nobias", "simbn"])
def test_a_diverging_step_size_is_recorded_as_divergence_never_as_numbers(arch, data, gen):
    """η = 50 blows every run up within an epoch: training stops, the runs are marked diverged with
    their epoch and last finite loss, and every metric of the last log is NaN, the 0-1 error too
    (a NaN output must not count as a correct sign: ``nan * y <= 0`` is False)."""
    x_test, y_test = data.sample(50, gen)
    nets = init_xor_nets(arch, RUNS, WIDTH, D, gen)
    log = train_xor(
        nets, data.x, data.y, x_test, y_test, method="sam", phases=[Phase(40, 50.0, 0.05)], generator=gen, log_points=6
    )
    assert log.diverged_runs == RUNS and all(e is not None and e <= 40 for e in log.diverged_epoch)
    assert log.epochs[-1] == max(log.diverged_epoch) < 40  # stopped once every run had diverged
    assert all(math.isfinite(v) for v in log.last_finite_loss)
    for field in ("train_loss", "trace", "test_error", "test_mse", "alignment", "first_layer_norm"):
        assert torch.isnan(getattr(log, field)[:, -1]).all(), field


def test_a_stable_run_is_not_marked_diverged(data, gen):
    x_test, y_test = data.sample(50, gen)
    nets = init_xor_nets("nobias", RUNS, WIDTH, D, gen)
    log = train_xor(
        nets, data.x, data.y, x_test, y_test, method="sam", phases=[Phase(3, 0.01, 0.05)], generator=gen, log_points=2
    )
    assert log.diverged_runs == 0 and log.diverged_epoch == [None] * RUNS
    assert torch.isfinite(log.test_error).all()


def test_simbn_closed_form_gradient_matches_autograd(data, gen):
    """The hand-derived Sim-BN gradient (through the training-set statistic) against autograd of the
    full forward, per run at its own sample; both are float64 sums of ~n·m terms of size ~1, so
    1e-12 relative is round-off with margin, and a wrong term shows at 1e-2."""
    nets = init_xor_nets("simbn", RUNS, WIDTH, D, gen, first_layer_scale=2.0)
    nets.gamma.uniform_(0.5, 1.5, generator=gen)
    index = torch.tensor([0, 5, 11])
    x1 = torch.cat([data.x, torch.ones(N, 1, dtype=data.x.dtype)], dim=1)
    grads = simbn_grads(nets.w1, nets.b1, nets.w2, nets.gamma, x1, data.y, index)
    params = [p.clone().requires_grad_(True) for p in nets.tensors()]
    out = xor_outputs(XorNets("simbn", *params), data.x)[torch.arange(RUNS), index]
    ref = torch.autograd.grad((out - data.y[index]).pow(2).sum(), params)
    for g, r in zip(grads, ref, strict=True):
        torch.testing.assert_close(g, r, rtol=1e-12, atol=1e-12)


def test_simbn_epoch_matches_the_batched_autograd_step(data, gen):
    nets = init_xor_nets("simbn", RUNS, WIDTH, D, gen, first_layer_scale=2.0)
    ref = XorNets("simbn", *[None if t is None else t.clone() for t in (nets.w1, nets.b1, nets.w2, nets.gamma)])
    order_gen, replay_gen = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    sam_epoch(nets, data.x, data.y, lr=0.05, rho=0.1, generator=order_gen)
    order = torch.argsort(torch.rand(RUNS, N, generator=replay_gen), dim=1)
    for t in range(N):
        simbn_step_autograd(ref, data.x, data.y, order[:, t], 0.05, 0.1)
    for a, b in zip(nets.tensors(), ref.tensors(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("arch", ["bias", "simbn"])
def test_an_interrupted_run_resumes_to_the_same_numbers_bit_for_bit(arch, data, gen):
    """Stop a run right after a checkpoint (the callback raises, as a kill would end it), round-trip
    the state through torch.save/load, resume it in fresh nets: every logged number and every
    weight equals the uninterrupted run's exactly."""
    import io

    x_test, y_test = data.sample(30, gen)
    phases = [Phase(4, 0.05, 0.05), Phase(3, 0.05, 0.1)]

    def fresh():
        return init_xor_nets(arch, RUNS, WIDTH, D, torch.Generator().manual_seed(3))

    def run(nets, **kw):
        return train_xor(
            nets,
            data.x,
            data.y,
            x_test,
            y_test,
            method="sam",
            phases=phases,
            generator=torch.Generator().manual_seed(9),
            log_points=4,
            hessian_samples=6,
            **kw,
        )

    whole_nets = fresh()
    whole = run(whole_nets)
    saved = []

    class Killed(Exception):
        pass

    def checkpoint(state):
        buffer = io.BytesIO()
        torch.save(state.to_dict(), buffer)
        saved.append(buffer.getvalue())
        if len(saved) == 3:
            raise Killed

    with pytest.raises(Killed):
        run(fresh(), checkpoint=checkpoint, checkpoint_every=0.0)
    state = TrainingState.from_dict(torch.load(io.BytesIO(saved[-1]), weights_only=True))
    assert 0 < state.epoch < 7 and not state.finished
    resumed_nets = fresh()
    resumed = run(resumed_nets, resume=state)
    for field in ("train_loss", "trace", "test_error", "test_mse", "alignment", "hessian_trace"):
        assert torch.equal(getattr(whole, field).nan_to_num(-1), getattr(resumed, field).nan_to_num(-1)), field
    assert whole.epochs == resumed.epochs
    for a, b in zip(whole_nets.tensors(), resumed_nets.tensors(), strict=True):
        assert torch.equal(a, b)
