"""Label-noise GD on the bias net: the written-out gradient against autograd, and plain GD at σ = 0."""

import torch

from constructions.label_noise_xor import label_noise_gradient, train_label_noise
from constructions.specs import XorSpec
from constructions.xor import build_xor
from constructions.xor_training import XorNets, _outputs, init_xor_nets


def _setup():
    data = build_xor(XorSpec(d=5, n=12), torch.Generator().manual_seed(0))
    return data, init_xor_nets("bias", 3, 9, 5, torch.Generator().manual_seed(1))


def test_the_gradient_is_autograds():
    data, nets = _setup()
    targets = data.y + 0.3 * torch.randn(3, 12, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    params = [t.clone().requires_grad_(True) for t in nets.tensors()]
    loss = (_outputs(nets, params, data.x, None) - targets).pow(2).mean(1).sum()  # runs are independent
    reference = torch.autograd.grad(loss, params)
    for mine, expected in zip(label_noise_gradient(nets, data.x, targets), reference, strict=True):
        torch.testing.assert_close(mine, expected, rtol=1e-12, atol=1e-14)


def test_sigma_zero_is_plain_gd_and_the_log_is_consistent():
    data, nets = _setup()
    sigma = torch.tensor([0.0, 0.5, 0.0], dtype=torch.float64)
    end, log = train_label_noise(
        nets, data.x, data.y, lr=0.05, sigma=sigma, steps=50, generator=torch.Generator().manual_seed(3)
    )
    plain = nets
    for _ in range(50):  # the σ = 0 runs must follow plain GD exactly
        g = label_noise_gradient(plain, data.x, data.y.expand(3, -1))
        plain = XorNets("bias", plain.w1 - 0.05 * g[0], plain.b1 - 0.05 * g[1], plain.w2 - 0.05 * g[2], None)
    torch.testing.assert_close(end.w1[[0, 2]], plain.w1[[0, 2]], rtol=1e-12, atol=1e-14)
    assert not torch.allclose(end.w1[1], plain.w1[1])
    assert log.steps[0] == 0 and log.steps[-1] == 50 and log.trace.shape == (3, len(log.steps))
