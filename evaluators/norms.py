"""Norm baselines: the parameter ℓ2 norm, the ℓ2 path norm and the product of spectral norms.

None of them looks at the loss; they are the baselines the flatness measures are scored against.
The path norm is invariant under the per-neuron rescalings of ReLU nets, the other two are not.
"""

from __future__ import annotations

import torch
from torch import nn

from evaluators.estimate import Estimate, precision_of
from evaluators.objective import Objective

__all__ = ["parameter_norm", "path_norm", "spectral_norm_product"]


def parameter_norm(obj: Objective, *, theta: torch.Tensor | None = None) -> Estimate:
    """‖θ‖₂ (a baseline)."""
    theta = obj.theta if theta is None else theta
    return Estimate(float(theta.norm()), 0.0, "exact", precision=precision_of(obj.dtype))


def _linear_weights(obj: Objective, theta: torch.Tensor) -> list[tuple[torch.Tensor, bool]]:
    model = obj.module
    if not isinstance(model, nn.Sequential):
        raise ValueError("path and spectral norms need an nn.Sequential MLP")
    params = obj.unflatten(theta.detach())
    return [  # a weight outside θ (a parameter subset) is read from the model
        (params.get(f"{i}.weight", layer.weight), layer.bias is not None)
        for i, layer in enumerate(model)
        if isinstance(layer, nn.Linear)
    ]


def path_norm(obj: Objective, *, theta: torch.Tensor | None = None) -> Estimate:
    """ℓ2 path norm ``sqrt(Σ_paths Π_l w_l²)`` over input→output paths of the weight matrices.

    Equal to ``sqrt(1ᵀ W_L^{∘2} ⋯ W_1^{∘2} 1)``. Biases are not paths from an input and are left
    out (``extra["ignores_biases"]`` says when the net has some).
    """
    theta = obj.theta if theta is None else theta
    layers = _linear_weights(obj, theta)
    v = torch.ones(layers[0][0].shape[1], dtype=obj.dtype, device=obj.device)
    for w, _ in layers:
        v = (w**2) @ v
    extra = {"ignores_biases": any(b for _, b in layers)}
    return Estimate(float(v.sum().sqrt()), 0.0, "exact", extra=extra, precision=precision_of(obj.dtype))


def spectral_norm_product(obj: Objective, *, theta: torch.Tensor | None = None) -> Estimate:
    """``Π_l ‖W_l‖₂`` over the Linear layers (a baseline)."""
    theta = obj.theta if theta is None else theta
    value = 1.0
    for w, _ in _linear_weights(obj, theta):
        value *= float(torch.linalg.matrix_norm(w, ord=2))
    return Estimate(value, 0.0, "exact", precision=precision_of(obj.dtype))
