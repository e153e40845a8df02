"""Function-preserving transformations of MLPs (``nn.Sequential`` of Linear / BatchNorm / activations).

Each returns a modified deep copy; the input net is never changed. For ReLU (positively
homogeneous) activations these leave the function unchanged exactly:

* ``layer_rescale``: T_α — incoming weights and bias of hidden layer k ×α, next weights ×1/α
  (Dinh et al. 2017, Eq. 6);
* ``deep_rescale``: ``θ_k → α_k θ_k`` with ``Π α_k = 1``, biases scaled by the running product;
* ``neuron_rescale``: per-neuron α_j on one hidden layer;
* ``permute_hidden``: a permutation of one hidden layer's units;
* ``scale_before_normalization``: weights and bias feeding a BatchNorm or LayerNorm ×c;
* ``reparametrize_inputs``: ``x → c·x`` with the first layer's weights ×1/c.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch
from torch import nn

__all__ = [
    "linear_layers",
    "layer_rescale",
    "deep_rescale",
    "neuron_rescale",
    "permute_hidden",
    "scale_before_normalization",
    "reparametrize_inputs",
]


def linear_layers(net: nn.Sequential) -> list[nn.Linear]:
    """The Linear layers of ``net`` in order."""
    return [m for m in net if isinstance(m, nn.Linear)]


def _check_hidden(net: nn.Sequential, k: int) -> tuple[nn.Linear, nn.Linear]:
    layers = linear_layers(net)
    if not 0 <= k < len(layers) - 1:
        raise ValueError(f"hidden layer index must be in [0, {len(layers) - 2}], got {k}")
    return layers[k], layers[k + 1]


def neuron_rescale(net: nn.Sequential, k: int, alphas: torch.Tensor) -> nn.Sequential:
    """Rows (and bias) of Linear k ×α_j, columns of Linear k+1 ×1/α_j (α_j > 0)."""
    out = copy.deepcopy(net)
    first, second = _check_hidden(out, k)
    if torch.is_tensor(alphas) and alphas.dtype != first.weight.dtype:
        raise TypeError(f"alphas must have the net's dtype {first.weight.dtype}, got {alphas.dtype}")
    alphas = torch.as_tensor(alphas, dtype=first.weight.dtype)
    if alphas.shape != (first.out_features,) or torch.any(alphas <= 0):
        raise ValueError(f"alphas must be {first.out_features} positive numbers")
    with torch.no_grad():
        first.weight.mul_(alphas[:, None])
        if first.bias is not None:
            first.bias.mul_(alphas)
        second.weight.div_(alphas[None, :])
    return out


def layer_rescale(net: nn.Sequential, k: int, alpha: float) -> nn.Sequential:
    """T_α on hidden layer k: ``(θ_k, θ_{k+1}) → (α θ_k, θ_{k+1}/α)`` (bias of layer k too)."""
    first, _ = _check_hidden(net, k)
    return neuron_rescale(net, k, torch.full((first.out_features,), float(alpha), dtype=torch.float64))


def deep_rescale(net: nn.Sequential, alphas: Sequence[float]) -> nn.Sequential:
    """``W_k → α_k W_k`` for every Linear layer, ``b_k → (Π_{j≤k} α_j) b_k``; needs Π α_k = 1."""
    out = copy.deepcopy(net)
    layers = linear_layers(out)
    if len(alphas) != len(layers):
        raise ValueError(f"need one alpha per Linear layer ({len(layers)}), got {len(alphas)}")
    prod = float(torch.tensor(alphas, dtype=torch.float64).prod())
    if abs(prod - 1) > 1e-12:
        raise ValueError(f"the alphas must multiply to 1, got {prod}")
    running = 1.0
    with torch.no_grad():
        for layer, a in zip(layers, alphas, strict=True):
            running *= a
            layer.weight.mul_(a)
            if layer.bias is not None:
                layer.bias.mul_(running)
    return out


def permute_hidden(net: nn.Sequential, k: int, perm: torch.Tensor) -> nn.Sequential:
    """Permute hidden layer k's units: rows and bias of Linear k, columns of Linear k+1."""
    out = copy.deepcopy(net)
    first, second = _check_hidden(out, k)
    perm = torch.as_tensor(perm)
    if sorted(perm.tolist()) != list(range(first.out_features)):
        raise ValueError("perm must be a permutation of the hidden units")
    with torch.no_grad():
        first.weight.copy_(first.weight[perm])
        if first.bias is not None:
            first.bias.copy_(first.bias[perm])
        second.weight.copy_(second.weight[:, perm])
    return out


def scale_before_normalization(net: nn.Sequential, k: int, c: float) -> nn.Sequential:
    """Linear k's weights and bias ×c; the BatchNorm or LayerNorm right after it (no eps to speak
    of) makes the function unchanged."""
    out = copy.deepcopy(net)
    idx = [i for i, m in enumerate(out) if isinstance(m, nn.Linear)][k]
    if idx + 1 >= len(out) or not isinstance(out[idx + 1], nn.modules.batchnorm._BatchNorm | nn.LayerNorm):
        raise ValueError(f"Linear layer {k} is not followed by a BatchNorm or LayerNorm layer")
    with torch.no_grad():
        out[idx].weight.mul_(c)
        if out[idx].bias is not None:
            out[idx].bias.mul_(c)
    return out


def reparametrize_inputs(net: nn.Sequential, x: torch.Tensor, c: float) -> tuple[nn.Sequential, torch.Tensor]:
    """``x → c·x`` and the first layer's weights ×1/c: the same function of the original inputs."""
    out = copy.deepcopy(net)
    with torch.no_grad():
        linear_layers(out)[0].weight.div_(c)
    return out, x * c
