"""Exact interpolators next to trained XOR nets, and what random first layers give by chance.

A trained net reaches train MSE ≈ 0.02, not 0, and Wen et al.'s trace identities and bounds hold
at interpolators. A nearby interpolator (the nearest to first order) is reached by Gauss–Newton
projection onto the zero-loss set: each step moves every run by the least-norm ``δ`` with ``J δ = −r`` (J the (n, P)
Jacobian of the outputs, r the residuals), ``δ = −J⁺r = −Jᵀ(JJᵀ)⁺r``, until ``max |r| < tol``.
(Solving for the output layer alone would be exact in one step, f being linear in W2, but near
width = n that step is ill-conditioned and moves W2 by more than W2 itself: measured.) The helpers
of ``constructions.xor_training`` are read, not changed: that module keys the training checkpoints.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from constructions.xor_training import XorNets, _outputs

__all__ = ["nearest_interpolator", "random_alignment"]


def _with(nets: XorNets, params: list[torch.Tensor]) -> XorNets:
    rest = list(params[1:])
    b1 = rest.pop(0) if nets.b1 is not None else None
    w2 = rest.pop(0)
    gamma = rest.pop(0) if nets.gamma is not None else None
    return replace(nets, w1=params[0], b1=b1, w2=w2, gamma=gamma)


def nearest_interpolator(
    nets: XorNets, x: torch.Tensor, y: torch.Tensor, *, steps: int = 50, tol: float = 1e-12
) -> tuple[XorNets, torch.Tensor, torch.Tensor]:
    """Gauss–Newton projection of every run onto ``f(x_i) = y_i``: at most ``steps`` steps, stopping
    once ``max_i |f(x_i) − y_i| < tol``.

    Returns the projected nets, ``max_i |f(x_i) − y_i|`` per run and the distance moved
    ``‖θ* − θ‖/‖θ‖`` per run. Sim-BN normalizes over ``x`` itself (the training set), as in training.
    """
    params = [t.detach().clone() for t in nets.tensors()]
    start = torch.cat([t.flatten(1) for t in params], 1)
    n = len(x)
    basis = torch.eye(n, dtype=x.dtype).unsqueeze(1).expand(n, nets.runs, n)
    for _ in range(steps):
        out, vjp = torch.func.vjp(lambda *ps: _outputs(nets, list(ps), x, None), *params)
        residual = out - y.unsqueeze(0)  # (R, n)
        if float(residual.abs().max()) < tol:
            break
        grads = torch.func.vmap(vjp)(basis)  # per parameter: (n, R, ...)
        jac = torch.cat([g.flatten(2) for g in grads], 2).transpose(0, 1)  # (R, n, P)
        # least-norm δ = −Jᵀ(JJᵀ)⁺r through the (n, n) Gram matrix; gelsd also where it is singular
        # (Sim-LN's scale-invariant features)
        gram = jac @ jac.transpose(1, 2)
        coef = torch.linalg.lstsq(gram, residual.unsqueeze(2), driver="gelsd").solution  # (R, n, 1)
        delta = -(jac.transpose(1, 2) @ coef).squeeze(2)  # (R, P)
        offset = 0
        for k, t in enumerate(params):
            size = t[0].numel()
            params[k] = t + delta[:, offset : offset + size].reshape(t.shape)
            offset += size
    out = _outputs(nets, params, x, None)
    moved = (torch.cat([t.flatten(1) for t in params], 1) - start).norm(dim=1) / start.norm(dim=1)
    return _with(nets, params), (out - y.unsqueeze(0)).abs().amax(1), moved


def random_alignment(weights: torch.Tensor, d: int, draws: int, rng: np.random.Generator) -> np.ndarray:
    """The output-weighted alignment ``Σ_j c_j ‖v_j[1:2]‖/‖v_j‖ / Σ_j c_j`` with isotropic random
    directions v_j in place of the first layer, averaged over runs: ``draws`` samples of it.

    ``weights`` (R, m) are the |c_j| of the trained runs, so the reference shares their spread.
    """
    c = weights.detach().abs().numpy()
    out = np.empty(draws)
    for k in range(draws):
        v = rng.standard_normal((*c.shape, d))
        frac = np.linalg.norm(v[..., :2], axis=-1) / np.linalg.norm(v, axis=-1)
        out[k] = float(np.mean((c * frac).sum(1) / c.sum(1)))
    return out
