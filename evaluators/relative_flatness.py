"""Relative flatness (Petzka et al. 2021): the Hessian of a layer weighted by its weights' Gram matrix."""

from __future__ import annotations

import torch
from torch import nn

from evaluators.estimate import Estimate, Stopwatch, precision_of
from evaluators.objective import Objective

__all__ = ["relative_flatness"]


def relative_flatness(obj: Objective, layer: str, *, theta: torch.Tensor | None = None) -> Estimate:
    """Relative flatness ``κ_Tr = Σ_{s,s'} ⟨w_s, w_s'⟩ Tr(∂²L / ∂w_s ∂w_s')`` (Petzka et al. 2021).

    ``layer`` names a weight matrix W (rows w_s: the incoming weights of neuron s); ``G = W Wᵀ``.
    Invariant under any rescaling of the layer's rows that the network compensates (T_α,
    per-neuron α_s).

    When W is an ``nn.Linear``'s weight and the samples do not interact (no BatchNorm), the layer's
    pre-activations are ``z_i = W φ_i`` with φ_i independent of W, so
    ``∂²L/∂W² = Σ_i c_i (φ_i φ_iᵀ) ⊗ ∂²ℓ_i/∂z²`` (c_i the sample's weight in L) and
    ``κ_Tr = Tr(A G)`` with ``A = Σ_i c_i ‖φ_i‖² ∂²ℓ_i/∂z²``: the Hessian of L in a shift
    ``z_i → z_i + ‖φ_i‖ δ`` at δ = 0, one product per neuron (rows). Otherwise, with ``H_kk`` the
    Hessian block of column k, ``κ_Tr = Σ_{j,k} v_jkᵀ H v_jk`` where ``v_jk`` holds W[:, j] in
    column k: (in_features)² exact quadratic forms.
    """
    theta = (obj.theta if theta is None else theta).detach()
    sl = obj.param_slice(layer)
    shape = obj.layout.shapes[obj.layout.names.index(layer)]
    if len(shape) != 2:
        raise ValueError(f"relative_flatness needs a 2-d weight matrix, {layer!r} has shape {tuple(shape)}")
    w = theta[sl].view(shape)
    with Stopwatch() as sw:
        module = obj.module.get_submodule(layer.rpartition(".")[0])
        if layer.endswith("weight") and isinstance(module, nn.Linear) and not _couples_samples(obj.module):
            value, hvps = _relative_flatness_by_layer_input(obj, theta, module, w), shape[0]
        else:
            value, hvps = _relative_flatness_by_columns(obj, theta, sl, w), shape[1] ** 2
    precision = precision_of(obj.dtype)
    return Estimate(value, 0.0, "exact", hvps=hvps, seconds=sw.seconds, extra={"layer": layer}, precision=precision)


def _couples_samples(module: nn.Module) -> bool:
    return any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in module.modules())


def _relative_flatness_by_layer_input(obj: Objective, theta: torch.Tensor, layer: nn.Linear, w: torch.Tensor) -> float:
    """``Tr(A G)`` with A the Hessian of L in the shift ``z_i → z_i + ‖φ_i‖ δ`` (see above)."""
    delta = torch.zeros(w.shape[0], dtype=obj.dtype, device=obj.device, requires_grad=True)

    def shift(_module, inputs, output):
        return output + inputs[0].norm(dim=-1, keepdim=True) * delta

    handle = layer.register_forward_hook(shift)
    eye = torch.eye(delta.numel(), dtype=obj.dtype, device=obj.device)
    try:
        if not obj.streamed:
            (g,) = torch.autograd.grad(obj.loss(theta), delta, create_graph=True)
            (a,) = torch.autograd.grad(g, delta, eye, is_grads_batched=True)
        else:  # A as a sum over batches, one batch's graph at a time
            a = torch.zeros(len(eye), len(eye), dtype=obj.dtype, device=obj.device)
            for losses in obj.per_batch_losses(theta):
                (g,) = torch.autograd.grad(losses.sum() / obj.n, delta, create_graph=True)
                a += torch.autograd.grad(g, delta, eye, is_grads_batched=True)[0]
                del g, losses  # this batch's graph goes before the next batch's is built
    finally:
        handle.remove()
    return float((a * (w @ w.T)).sum())


def _relative_flatness_by_columns(obj: Objective, theta: torch.Tensor, sl: slice, w: torch.Tensor) -> float:
    """``Σ_{j,k} v_jkᵀ H v_jk``, one batch of probes per column of W (memory: cols × P)."""
    rows, cols = w.shape
    value = 0.0
    for j in range(cols):
        probes = torch.zeros(cols, obj.num_params, dtype=obj.dtype, device=obj.device)
        for k in range(cols):
            v = torch.zeros(rows, cols, dtype=obj.dtype, device=obj.device)
            v[:, k] = w[:, j]
            probes[k, sl] = v.reshape(-1)
        value += float((probes * obj.hvp(probes, theta)).sum())
    return value
