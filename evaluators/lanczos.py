"""The Lanczos recurrence on the objective's device, fully reorthogonalized.

From a unit q_1, ``β_j q_{j+1} = H q_j − α_j q_j − β_{j−1} q_{j−1}`` with ``α_j = q_jᵀ H q_j`` builds
an orthonormal basis Q_m of the Krylov space and the tridiagonal ``T_m = Q_mᵀ H Q_m`` (Lanczos
1950). In floating point the q_j lose orthogonality once a Ritz value converges (Paige 1971), so
every new vector is orthogonalized against the whole basis, twice (Kahan–Parlett: "twice is
enough"). The basis is kept on the device as an m × P tensor: memory m·P numbers.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

__all__ = ["lanczos", "tridiagonal"]


def tridiagonal(alpha: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """The symmetric tridiagonal T with diagonal α and off-diagonal β."""
    return np.diag(alpha) + np.diag(beta, 1) + np.diag(beta, -1)


def lanczos(
    matvec: Callable[[torch.Tensor], torch.Tensor],
    v0: torch.Tensor,
    steps: int,
    *,
    done: Callable[[np.ndarray, np.ndarray, float], bool] | None = None,
) -> tuple[np.ndarray, np.ndarray, torch.Tensor]:
    """``(α, β, Q)``: up to ``steps`` Lanczos steps from ``v0`` (normalized here).

    Stops early when the Krylov space is exhausted (the next β below 1e-10 of the scale of T seen
    so far, max(|α|, β): relative only, so a matrix of any norm gets its full run) or when
    ``done(α, β, β_next)`` says so. ``Q`` holds the ``len(α)`` basis vectors as rows.
    """
    basis = torch.empty(steps, v0.numel(), dtype=v0.dtype, device=v0.device)
    basis[0] = v0 / v0.norm()
    alpha: list[float] = []
    beta: list[float] = []
    for j in range(steps):
        w = matvec(basis[j])
        alpha.append(float(w @ basis[j]))
        q = basis[: j + 1]
        w = w - q.T @ (q @ w)
        w = w - q.T @ (q @ w)  # twice is enough
        b = float(w.norm())
        if j == steps - 1 or b <= 1e-10 * max(b, *(abs(a) for a in alpha), *beta):
            break
        if done is not None and done(np.array(alpha), np.array(beta), b):
            break
        beta.append(b)
        basis[j + 1] = w / b
    return np.array(alpha), np.array(beta), basis[: len(alpha)]
