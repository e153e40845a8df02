"""Every symmetry preserves the function exactly (float64) and validates its arguments."""

import pytest
import torch

from constructions import symmetries
from constructions.nets import mlp


@pytest.fixture
def net(gen):
    return mlp(4, (6, 5), 2, generator=gen)


@pytest.fixture
def x(gen):
    return torch.randn(30, 4, generator=gen, dtype=torch.float64)


def _same(a, b, x):
    with torch.no_grad():
        return (a(x) - b(x)).abs().max().item() <= 1e-12 * b(x).abs().max().item()


@pytest.mark.parametrize("alpha", [1e-3, 0.3, 7.0, 1e3])
def test_rescalings_preserve_function(net, x, gen, alpha):
    assert _same(symmetries.layer_rescale(net, 0, alpha), net, x)
    assert _same(symmetries.layer_rescale(net, 1, alpha), net, x)
    alphas = alpha ** (torch.rand(6, generator=gen, dtype=torch.float64) * 2 - 1)
    assert _same(symmetries.neuron_rescale(net, 0, alphas), net, x)
    assert _same(symmetries.deep_rescale(net, [alpha, 1.0, 1 / alpha]), net, x)
    moved, xc = symmetries.reparametrize_inputs(net, x, alpha)
    with torch.no_grad():
        assert torch.allclose(moved(xc), net(x), rtol=1e-12, atol=1e-14)


def test_layer_rescale_is_exactly_alpha(net):
    moved = symmetries.layer_rescale(net, 0, 0.3)
    assert torch.equal(moved[0].weight, net[0].weight * 0.3)  # float64 α, no float32 detour
    assert torch.equal(moved[2].weight, net[2].weight / 0.3)


def test_permutation_and_batchnorm_scaling(gen, x):
    net = mlp(4, (6,), 1, generator=gen)
    perm = torch.randperm(6, generator=gen)
    assert _same(symmetries.permute_hidden(net, 0, perm), net, x)
    bn = mlp(4, (6,), 1, batchnorm=True, generator=gen).train()
    assert _same(symmetries.scale_before_normalization(bn, 0, 13.0), bn, x)
    ln = mlp(4, (6,), 1, layernorm=True, generator=gen)
    assert _same(symmetries.scale_before_normalization(ln, 0, 0.07), ln, x)


def test_input_net_untouched(net):
    before = [p.clone() for p in net.parameters()]
    symmetries.layer_rescale(net, 0, 5.0)
    assert all(torch.equal(a, b) for a, b in zip(before, net.parameters(), strict=True))


def test_argument_errors(net):
    with pytest.raises(ValueError, match="hidden layer index"):
        symmetries.layer_rescale(net, 2, 2.0)
    with pytest.raises(ValueError, match="multiply to 1"):
        symmetries.deep_rescale(net, [2.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="positive"):
        symmetries.neuron_rescale(net, 0, -torch.ones(6, dtype=torch.float64))
    with pytest.raises(ValueError, match="permutation"):
        symmetries.permute_hidden(net, 0, torch.zeros(6, dtype=torch.long))
    with pytest.raises(ValueError, match="BatchNorm or LayerNorm"):
        symmetries.scale_before_normalization(net, 0, 2.0)
