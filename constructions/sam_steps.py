"""Fast 1-SAM epochs for the Wen et al. XOR nets, batched over R independent runs.

1-SAM on sample i: ``w ← w − η ∇ℓ_i(w + ρ ∇ℓ_i(w)/‖∇ℓ_i(w)‖)``, ``ℓ_i = (f(x_i) − y_i)²``.

**Rank-one nets** (no-bias, bias, Sim-LN). One sample touches W1 only through ``h = W1 x_i + b1``,
so with ``δ = ∂ℓ/∂h`` and ``u = ∂ℓ/∂W2`` the ascent point needs no copy of W1: its
pre-activations are ``h + k δ ‖[x_i; 1]‖²`` and its output weights ``W2 + k u``, with
``k = ρ / √(‖u‖² + ‖δ‖² ‖[x_i; 1]‖²)``. The descent ``W1 ← W1 − η δ' x_iᵀ`` is one pass over the
rows of W1, and the same pass dots each updated row with the next sample, so the next step's
pre-activations come free: one read and one write of W1 per step. :func:`rank_one_epoch` runs a
whole epoch of every run in one compiled call (numba, runs spread over threads; a run's
arithmetic is sequential, so the thread count never changes a number).

**Sim-BN** divides neuron j by ``s_j = √((1/n) Σ_k a_jk²)``, ``a = relu(W1 Xᵀ + b1)``, over the
whole training set, so a step touches every sample. With ``z = a/s``, ``f_i = Σ_j W2_j γ_j z_ji``,
``g = 2(f_i − y_i)`` and ``c_j = g W2_j γ_j``, differentiating through ``s`` by hand gives

    ∂ℓ/∂W1_j = (c_j/s_j) (1[h_ji > 0] x_i − (z_ji/n) (A X)_j / s_j),
    ∂ℓ/∂b1_j = (c_j/s_j) (1[h_ji > 0] − (z_ji/n) Σ_k a_jk / s_j),
    ∂ℓ/∂W2_j = g γ_j z_ji,   ∂ℓ/∂γ_j = g W2_j z_ji,

so a gradient costs two products of m·n·d multiply-adds (``H = W1 Xᵀ`` and ``A X``), four per
SAM step: :func:`simbn_epoch` batches them over runs as single matrix products.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import torch

__all__ = ["rank_one_epoch", "simbn_grads", "simbn_epoch"]


# ---------------------------------------------------------------------- rank-one nets (numba)
@numba.njit(cache=True, inline="always")
def _hidden_backward(h, v, y, simln_eps, a, dh, dv):
    """Forward and backward of one sample at pre-activations ``h`` and output weights ``v``:
    writes ∂ℓ/∂h into ``dh`` and ∂ℓ/∂W2 into ``dv`` (``a`` is scratch). Sim-LN when simln_eps > 0."""
    m = h.shape[0]
    sq = 0.0
    for j in range(m):
        a[j] = h[j] if h[j] > 0.0 else 0.0
        sq += a[j] * a[j]
    nrm = math.sqrt(sq)
    s = max(nrm, simln_eps) if simln_eps > 0.0 else 1.0
    f = 0.0
    for j in range(m):
        a[j] = a[j] / s  # z: the features (a itself for the plain nets)
        f += v[j] * a[j]
    g = 2.0 * (f - y)
    proj = 0.0
    if simln_eps > 0.0 and nrm > simln_eps:  # ∂(a/‖a‖)/∂a = (I − z zᵀ)/‖a‖ above ϵ, I/ϵ below
        for j in range(m):
            proj += a[j] * g * v[j]
    for j in range(m):
        dv[j] = g * a[j]
        dz = (g * v[j] - a[j] * proj) / s
        dh[j] = dz if h[j] > 0.0 else 0.0


@numba.njit(parallel=True, cache=True)
def _rank_one_epoch(w1, b1, w2, x, y, order, lr, rho, has_bias, simln_eps):
    runs, m, d = w1.shape
    n = order.shape[1]
    lift_extra = 1.0 if has_bias else 0.0
    for r in numba.prange(runs):
        h = np.empty(m, dtype=w1.dtype)
        h2 = np.empty(m, dtype=w1.dtype)
        v2 = np.empty(m, dtype=w1.dtype)
        a = np.empty(m, dtype=w1.dtype)
        dh = np.empty(m, dtype=w1.dtype)
        dv = np.empty(m, dtype=w1.dtype)
        i = order[r, 0]
        for j in range(m):
            acc = b1[r, j] if has_bias else 0.0
            for k in range(d):
                acc += w1[r, j, k] * x[i, k]
            h[j] = acc
        for t in range(n):
            i = order[r, t]
            lift = lift_extra
            for k in range(d):
                lift += x[i, k] * x[i, k]
            _hidden_backward(h, w2[r], y[i], simln_eps, a, dh, dv)
            sq = 0.0
            for j in range(m):
                sq += dv[j] * dv[j] + dh[j] * dh[j] * lift
            step = rho / math.sqrt(sq) if sq > 0.0 else 0.0  # ∇ℓ = 0: no ascent
            for j in range(m):
                h2[j] = h[j] + step * dh[j] * lift
                v2[j] = w2[r, j] + step * dv[j]
            _hidden_backward(h2, v2, y[i], simln_eps, a, dh, dv)
            nxt = order[r, t + 1] if t + 1 < n else i
            for j in range(m):  # one pass: the rank-one descent, and the next sample's pre-activation
                c = lr * dh[j]
                acc = 0.0
                for k in range(d):
                    w = w1[r, j, k] - c * x[i, k]
                    w1[r, j, k] = w
                    acc += w * x[nxt, k]
                if has_bias:
                    b1[r, j] -= c
                    acc += b1[r, j]
                h[j] = acc
                w2[r, j] -= lr * dv[j]


def rank_one_epoch(nets, x: torch.Tensor, y: torch.Tensor, order: torch.Tensor, lr: float, rho: float) -> None:
    """One 1-SAM epoch of every run of a no-bias, bias or Sim-LN ``XorNets``, in place.

    ``order`` (R, n) is each run's visiting order. Uses ``torch.get_num_threads()`` threads over runs.
    """
    w1 = nets.w1.numpy()
    b1 = nets.b1.numpy() if nets.b1 is not None else np.zeros((1, 1), dtype=w1.dtype)
    numba.set_num_threads(max(1, min(torch.get_num_threads(), numba.config.NUMBA_NUM_THREADS)))
    _rank_one_epoch(
        w1,
        b1,
        nets.w2.numpy(),
        x.to(nets.w1.dtype).numpy(),
        y.to(nets.w1.dtype).numpy(),
        order.numpy(),
        float(lr),
        float(rho),
        nets.b1 is not None,
        float(nets.simln_eps) if nets.arch == "simln" else 0.0,
    )


# ---------------------------------------------------------------------- Sim-BN (closed form)
def simbn_grads(w1, b1, w2, gamma, x1, y, index):
    """∇ℓ_i of every run's Sim-BN net at its own sample ``index[r]`` (see the module docstring).

    Shapes: w1 (R, m, d), b1/w2/gamma (R, m), ``x1 = [X, 1]`` (n, d + 1), y (n,), index (R,).
    Returns the gradients in the order and shapes of (w1, b1, w2, gamma). Besides the two
    products, one pass over the (R, m, n) activations (relu, in place) and one for ``s``; the
    column of ones gives Σ_k a_jk with ``A X``.
    """
    n, d = x1.shape[0], x1.shape[1] - 1
    a = torch.baddbmm(b1.unsqueeze(2), w1, x1[:, :d].T.expand(w1.shape[0], d, n)).relu_()  # (R, m, n)
    s = torch.linalg.vector_norm(a, dim=2).div_(math.sqrt(n)).clamp_min_(1e-150)  # a dead neuron stays at 0
    ax1 = torch.matmul(a, x1)  # (R, m, d + 1): A X and Σ_k a_jk
    a_i = a.gather(2, index.view(-1, 1, 1).expand(-1, a.shape[1], 1)).squeeze(2)
    z_i = a_i / s
    g = 2.0 * ((w2 * gamma * z_i).sum(1) - y[index])
    coef = g.unsqueeze(1) * w2 * gamma / s
    on = (a_i > 0).to(a.dtype)  # relu'(h_i); a_i > 0 exactly when h_i > 0
    zn = z_i / (n * s)
    dw1 = coef.unsqueeze(2) * (on.unsqueeze(2) * x1[index, :d].unsqueeze(1) - zn.unsqueeze(2) * ax1[..., :d])
    db1 = coef * (on - zn * ax1[..., d])
    return dw1, db1, g.unsqueeze(1) * gamma * z_i, g.unsqueeze(1) * w2 * z_i


def simbn_epoch(nets, x: torch.Tensor, y: torch.Tensor, order: torch.Tensor, lr: float, rho: float) -> None:
    """One 1-SAM epoch of every run of a Sim-BN ``XorNets``, in place (closed-form gradients)."""
    params = [nets.w1, nets.b1, nets.w2, nets.gamma]
    x1 = torch.cat([x, torch.ones(len(x), 1, dtype=x.dtype)], dim=1).to(nets.w1.dtype)
    y = y.to(nets.w1.dtype)
    for t in range(order.shape[1]):
        index = order[:, t]
        grads = simbn_grads(*params, x1, y, index)
        norm = sum(g.pow(2).flatten(1).sum(1) for g in grads).sqrt()
        step = torch.where(norm > 0, rho / norm, torch.zeros_like(norm))
        ascent = [p + step.view(-1, *[1] * (p.ndim - 1)) * g for p, g in zip(params, grads, strict=True)]
        for p, g in zip(params, simbn_grads(*ascent, x1, y, index), strict=True):
            p.sub_(lr * g)
