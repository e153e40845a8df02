"""Population grids, the SGD/SAM trainer and the model builders of the measure benchmark."""

import math

import pytest
import torch
from pydantic import ValidationError

from constructions.nets import mlp
from constructions.populations import (
    DigitsModel,
    MultiIndexModel,
    Population,
    XorModel,
    task_of,
    train_model,
)
from constructions.training import train_sgd
from evaluators import zero_one_error


def test_grid_expands_to_every_combination_in_order():
    pop = Population(base=XorModel(d=6, n=20), grid={"bias": (False, True), "lr": (0.1, 0.2, 0.3), "n": (20,)})
    members = pop.members()
    assert len(members) == len(pop) == 6
    assert [(m.bias, m.lr) for m in members[:3]] == [(False, 0.1), (False, 0.2), (False, 0.3)]
    assert pop.hyperparameters == ["bias", "lr"]  # n takes one value: not an axis
    assert all(m.d == 6 for m in members)


@pytest.mark.parametrize(
    "grid, message",
    [
        ({"depth": (1, 2)}, "grid.depth: not a field of a xor model"),
        ({"lr": (0.1, 0.1)}, "grid.lr: values must be distinct"),
        ({"lr": ()}, "at least 1 item"),
        ({"lr": (0.1, -1.0)}, "greater than 0"),
    ],
)
def test_bad_grids_name_the_field(grid, message):
    with pytest.raises(ValidationError, match=message):
        Population(base=XorModel(), grid=grid)


def _one_step_reference(model, x, y, lr, wd, rho):
    """θ ← (1 − ηλ)θ − η ∇L(θ + ρ g/‖g‖), written out with a flat parameter vector."""
    params = list(model.parameters())
    theta = torch.cat([p.detach().reshape(-1) for p in params])

    def loss(flat):
        out, i = x, 0
        weights = []
        for p in params:
            weights.append(flat[i : i + p.numel()].view_as(p))
            i += p.numel()
        w1, b1, w2, b2 = weights
        h = torch.relu(out @ w1.T + b1)
        return ((h @ w2.T + b2 - y) ** 2).sum(dim=1).mean()

    g = torch.func.grad(loss)(theta)
    g_adv = torch.func.grad(loss)(theta + rho * g / g.norm())
    return (1 - lr * wd) * theta - lr * g_adv


@pytest.mark.parametrize("rho", [0.0, 0.05])
def test_sgd_sam_step_matches_the_formula(rho):
    gen = torch.Generator().manual_seed(0)
    model = mlp(3, (4,), 2, generator=gen)
    x, y = torch.randn(5, 3, dtype=torch.float64, generator=gen), torch.randn(5, 2, dtype=torch.float64, generator=gen)
    expected = _one_step_reference(model, x, y, lr=0.1, wd=0.01, rho=rho)
    # one full batch, one epoch: the batch order does not matter
    train_sgd(
        model, x, y, lr=0.1, batch_size=5, weight_decay=0.01, sam_rho=rho, max_epochs=1, target_loss=1e-9, generator=gen
    )
    got = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-14)


def test_sgd_stops_at_the_criterion_and_reports_divergence():
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(16, 3, dtype=torch.float64, generator=gen)
    y = torch.randn(16, 1, dtype=torch.float64, generator=gen)
    run = train_sgd(
        mlp(3, (32,), 1, generator=gen), x, y, lr=0.05, batch_size=4, max_epochs=3000, target_loss=1e-3, generator=gen
    )
    assert run.converged and run.loss <= 1e-3 and run.epochs < 3000
    blown = train_sgd(
        mlp(3, (32,), 1, generator=gen),
        x,
        y * 1e3,
        lr=10.0,
        batch_size=4,
        max_epochs=50,
        target_loss=1e-3,
        generator=gen,
    )
    assert blown.diverged and not blown.converged
    assert math.isnan(blown.loss) and math.isnan(blown.error)
    assert math.isfinite(blown.last_finite_loss) == (blown.epochs > 1)  # no finite epoch before the first


def test_zero_one_error_for_one_hot_and_sign_outputs():
    assert zero_one_error(torch.tensor([[0.1, 0.9], [0.8, 0.2]]), torch.tensor([[0.0, 1.0], [0.0, 1.0]])) == 0.5
    assert zero_one_error(torch.tensor([[0.3], [-2.0]]), torch.tensor([[1.0], [1.0]])) == 0.5


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_zero_one_error_is_undefined_for_non_finite_outputs(bad):
    """A diverged model's NaN output must never count as a correct prediction (nan * y <= 0 is False)."""
    assert math.isnan(zero_one_error(torch.tensor([[bad], [-2.0]]), torch.tensor([[1.0], [-1.0]])))
    assert math.isnan(zero_one_error(torch.tensor([[bad, 0.9], [0.8, 0.2]]), torch.tensor([[0.0, 1.0], [1.0, 0.0]])))


@pytest.mark.parametrize(
    "spec",
    [
        DigitsModel(width=8, n_train=40, n_test=50, max_epochs=3),
        XorModel(d=6, n=20, width=8, bias=True, max_epochs=3, n_test=50),
        MultiIndexModel(d=5, n=12, width=8, max_epochs=3, n_test=50),
    ],
    ids=lambda s: s.kind,
)
def test_train_model_is_a_function_of_the_generators(spec):
    a = train_model(spec, torch.Generator().manual_seed(5), torch.Generator().manual_seed(6))
    b = train_model(spec, torch.Generator().manual_seed(5), torch.Generator().manual_seed(6))
    for pa, pb in zip(a.model.parameters(), b.model.parameters(), strict=True):
        assert torch.equal(pa, pb)
    assert a.run.epochs == 3 and a.x.dtype == torch.float64 and a.y.dim() == 2
    assert a.classifier == (spec.kind != "multi_index")
    other_init = train_model(spec, torch.Generator().manual_seed(5), torch.Generator().manual_seed(7))
    assert torch.equal(other_init.x, a.x) and torch.equal(other_init.x_test, a.x_test)  # the data: from the first
    assert not torch.equal(next(other_init.model.parameters()), next(a.model.parameters()))


def test_members_of_one_task_share_its_draws():
    """Digits: the split and noisy labels are nested in n_train / label_noise; multi-index: one Θ*."""
    data = lambda: torch.Generator().manual_seed(3)  # noqa: E731
    init = torch.Generator().manual_seed(4)
    small = train_model(DigitsModel(width=4, n_train=20, n_test=30, max_epochs=1), data(), init)
    large = train_model(DigitsModel(width=4, n_train=40, n_test=30, max_epochs=1, label_noise=0.5), data(), init)
    assert torch.equal(small.x, large.x[:20])
    assert task_of(DigitsModel(n_train=20)) == task_of(DigitsModel(n_train=40, lr=0.5)) == {"kind": "digits"}
    assert task_of(MultiIndexModel(d=5, n=10, noise=0.3)) == {
        "kind": "multi_index",
        "d": 5,
        "m_star": 2,
        "link": "sum_single_index",
    }


def test_xor_nets_have_no_output_bias_and_optional_hidden_bias():
    g = torch.Generator
    with_bias = train_model(XorModel(d=6, n=10, width=4, bias=True, max_epochs=1, n_test=10), g(), g())
    without = train_model(XorModel(d=6, n=10, width=4, bias=False, max_epochs=1, n_test=10), g(), g())
    assert with_bias.model[0].bias is not None and with_bias.model[2].bias is None
    assert without.model[0].bias is None and without.model[2].bias is None
