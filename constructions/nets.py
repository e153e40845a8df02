"""Networks used by the scenarios (all plain ``torch.nn`` modules)."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["mlp", "BNLinearRegression"]


def mlp(
    d: int,
    hidden: tuple[int, ...],
    outputs: int = 1,
    *,
    bias: bool = True,
    output_bias: bool | None = None,
    activation: str = "relu",
    batchnorm: bool = False,
    layernorm: bool = False,
    batchnorm_eps: float = 1e-300,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float64,
) -> nn.Sequential:
    """``Linear → [BatchNorm1d | LayerNorm] → act → … → Linear`` with PyTorch's default (Kaiming-uniform) init.

    The initialization is drawn from ``generator`` so the net is a function of the seed alone.
    ``output_bias`` (default: ``bias``) sets the last layer's bias alone, e.g. hidden biases
    without an output bias as in Wen, Li, Ma 2023.
    BatchNorm has no affine parameters and, by default, ``eps = 1e-300`` (torch refuses 0): it
    only normalizes, which makes the weights (and bias) before it scale-invariant to float64
    round-off (PyTorch's default eps = 1e-5 breaks that at small weight norms). ``layernorm``
    does the same with a non-affine LayerNorm (normalizing each sample over the layer's units).
    """
    act = {"relu": nn.ReLU, "tanh": nn.Tanh}[activation]
    layers: list[nn.Module] = []
    widths = (d, *hidden)
    for fan_in, fan_out in zip(widths[:-1], widths[1:], strict=True):
        layers.append(nn.Linear(fan_in, fan_out, bias=bias, dtype=dtype))
        if batchnorm:
            layers.append(nn.BatchNorm1d(fan_out, eps=batchnorm_eps, affine=False, dtype=dtype))
        if layernorm:
            layers.append(nn.LayerNorm(fan_out, eps=batchnorm_eps, elementwise_affine=False, dtype=dtype))
        layers.append(act())
    layers.append(nn.Linear(widths[-1], outputs, bias=bias if output_bias is None else output_bias, dtype=dtype))
    net = nn.Sequential(*layers)
    with torch.no_grad():
        for layer in net:
            if isinstance(layer, nn.Linear):
                bound = 1.0 / layer.in_features**0.5
                layer.weight.copy_(torch.rand(layer.weight.shape, generator=generator, dtype=dtype) * 2 * bound - bound)
                if layer.bias is not None:
                    layer.bias.copy_(torch.rand(layer.bias.shape, generator=generator, dtype=dtype) * 2 * bound - bound)
    return net


class BNLinearRegression(nn.Module):
    """``Φ(x; w) = γ (wᵀx − μ1)/σ1 + β`` (Lyu, Li, Arora 2022, §5).

    μ1, σ1 are the mean and (1/n) standard deviation of ``{wᵀx_i}`` over the batch the module is
    applied to (the whole training set in the paper). γ and β are fixed buffers. The loss is
    scale-invariant in w: ``Φ(x; cw) = Φ(x; w)`` for c > 0.
    """

    def __init__(self, w: torch.Tensor, gamma: float, beta: float) -> None:
        super().__init__()
        self.w = nn.Parameter(w.clone())
        self.register_buffer("gamma", torch.tensor(float(gamma), dtype=w.dtype))
        self.register_buffer("beta", torch.tensor(float(beta), dtype=w.dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = x @ self.w
        mu = z.mean()
        sigma = ((z - mu) ** 2).mean().sqrt()
        return self.gamma * (z - mu) / sigma + self.beta
