"""The written-out SGD path of ``train_sgd`` against autograd: the same bits, not just close.

Bit-equality (``torch.equal``), not a tolerance, is the reference here: the committed records of
every family that trains by SGD were made by the autograd loop, and the written-out path must
reproduce them exactly, so any reordering of a sum would show up as a failure.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from constructions.nets import mlp
from constructions.training import relu_mlp_layers, relu_mlp_mse_gradient, train_sgd
from evaluators import mse, zero_one_error

NETS = {
    "digits 64-32-10": dict(d=64, hidden=(32,), outputs=10),
    "xor, hidden biases only": dict(d=12, hidden=(20,), outputs=1, output_bias=False),
    "no biases": dict(d=8, hidden=(16,), outputs=1, bias=False),
    "two hidden layers": dict(d=10, hidden=(16, 8), outputs=3),
}


def _net(spec, seed=0):
    spec = dict(spec)
    d, hidden, outputs = spec.pop("d"), spec.pop("hidden"), spec.pop("outputs")
    return mlp(d, hidden, outputs, generator=torch.Generator().manual_seed(seed), **spec)


@pytest.mark.parametrize("batch", [1, 7, 64])
@pytest.mark.parametrize("name", NETS)
def test_written_out_gradient_is_autograd_bit_for_bit(name, batch):
    model = _net(NETS[name])
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(batch, model[0].in_features, dtype=torch.float64, generator=gen)
    y = torch.randn(batch, model[-1].out_features, dtype=torch.float64, generator=gen)
    expected = torch.autograd.grad(mse(model(x), y), list(model.parameters()))
    got = relu_mlp_mse_gradient(relu_mlp_layers(model), x, y)
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert torch.equal(g, e)


def test_only_relu_mlps_take_the_written_out_path():
    assert relu_mlp_layers(mlp(4, (3,), 1)) is not None
    assert relu_mlp_layers(mlp(4, (3,), 1, activation="tanh")) is None
    assert relu_mlp_layers(mlp(4, (3,), 1, batchnorm=True)) is None
    assert relu_mlp_layers(nn.Sequential(mlp(4, (3,), 1))) is None  # nested: trains by autograd


@pytest.mark.parametrize(
    "name, lr, batch, weight_decay, sam_rho",
    [
        ("digits 64-32-10", 0.1, 16, 0.0, 0.0),
        ("digits 64-32-10", 0.1, 7, 1e-3, 0.05),  # a last batch of another size, WD and SAM
        ("xor, hidden biases only", 0.05, 10, 0.0, 0.1),
        ("two hidden layers", 0.05, 40, 1e-2, 0.0),  # full batch
    ],
)
def test_train_sgd_written_out_equals_the_autograd_loop(name, lr, batch, weight_decay, sam_rho):
    """A nested Sequential computes the same function but is not recognized as a ReLU MLP, so it
    trains by the module and autograd: both runs must end in the same bits and the same record."""
    spec = NETS[name]
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(40, spec["d"], dtype=torch.float64, generator=gen)
    y = torch.randn(40, spec["outputs"], dtype=torch.float64, generator=gen)
    runs, weights = [], []
    for model in (_net(spec), nn.Sequential(_net(spec))):
        runs.append(
            train_sgd(
                model,
                x,
                y,
                lr=lr,
                batch_size=batch,
                weight_decay=weight_decay,
                sam_rho=sam_rho,
                max_epochs=25,
                target_loss=1e-12,
                error_fn=zero_one_error,
                generator=torch.Generator().manual_seed(3),
            )
        )
        weights.append(list(model.parameters()))
    assert runs[0] == runs[1]
    for a, b in zip(*weights, strict=True):
        assert torch.equal(a, b)
