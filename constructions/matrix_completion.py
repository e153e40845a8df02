"""Matrix completion through a BatchNorm on the predictions (Lyu, Li, Arora 2022, Figure 1, at CPU size).

A rank-``r`` truth ``M = A Bᵀ/√r`` (``A, B`` standard normal, ``size × r``) is observed on a
random set Ω of its entries. The model is a factorization ``Z = U Vᵀ`` (``U, V``: ``size × k``)
read through a BatchNorm over the observed entries, with γ, β fixed to the observed targets' std
and mean (not trained, so every trained parameter is scale-invariant, as the theory assumes)::

    Φ_ij(U, V) = γ (Z_ij − μ_Ω(Z)) / σ_Ω(Z) + β,   L(U, V) = mean_{(i,j)∈Ω} (Φ_ij − M_ij)².

``L(cU, V) = L(U, c'V) = L(U, V)`` for all c, c' > 0. The test loss is the mean squared error on
the unobserved entries (the statistics μ_Ω, σ_Ω are the training ones, as in eval mode); a
predictor that knows nothing scores the variance of those entries. The spherical sharpness is
``λ1(∇²L(w/‖w‖))`` with ``w = (U, V)`` flattened (Lyu et al., Definition 1.1), from the dense
Hessian; the effective rank of ``Z`` is ``exp(−Σ p_i log p_i)``, ``p = s/‖s‖₁`` for its singular
values ``s`` (Roy & Vetterli 2007).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from pydantic import Field

from constructions.divergence import check_finite
from constructions.specs import NonNegativeFloat, PositiveFloat, PositiveInt, Probability, Spec

__all__ = [
    "CompletionRun",
    "MatrixCompletionProblem",
    "MatrixCompletionSpec",
    "build_matrix_completion",
    "effective_rank",
    "gd_weight_decay",
]


class MatrixCompletionSpec(Spec):
    """The truth, the observations and the factorization's width."""

    size: PositiveInt = Field(default=20, description="the matrix is size × size")
    rank: PositiveInt = 2
    factor_dim: PositiveInt = Field(default=20, description="k: U, V are size × k (over-parametrized when k > rank)")
    observed: Probability = Field(default=0.5, description="each entry is observed with this probability")
    init_scale: PositiveFloat = 1.0


@dataclass(frozen=True)
class MatrixCompletionProblem:
    """The truth, the mask of observed entries and the BatchNorm's fixed γ, β."""

    truth: torch.Tensor
    mask: torch.Tensor
    gamma: float
    beta: float
    spec: MatrixCompletionSpec

    def split(self, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        n, k = self.spec.size, self.spec.factor_dim
        return w[: n * k].view(n, k), w[n * k :].view(n, k)

    def product(self, w: torch.Tensor) -> torch.Tensor:
        """Z = U Vᵀ."""
        u, v = self.split(w)
        return u @ v.T

    def prediction(self, w: torch.Tensor) -> torch.Tensor:
        """Φ(U, V) on every entry, normalized by the observed entries' statistics."""
        z = self.product(w)
        observed = z[self.mask]
        return self.gamma * (z - observed.mean()) / observed.std(unbiased=False) + self.beta

    def train_loss(self, w: torch.Tensor) -> torch.Tensor:
        return ((self.prediction(w)[self.mask] - self.truth[self.mask]) ** 2).mean()

    def test_loss(self, w: torch.Tensor) -> torch.Tensor:
        return ((self.prediction(w)[~self.mask] - self.truth[~self.mask]) ** 2).mean()

    @property
    def test_variance(self) -> float:
        """The test loss of the best constant predictor: a model that learned nothing."""
        return float(self.truth[~self.mask].var(unbiased=False))

    def spherical_sharpness(self, w: torch.Tensor) -> float:
        """λ1(∇²L(w/‖w‖)) from the dense Hessian (2·size·k parameters)."""
        hess = torch.func.hessian(self.train_loss)(w / w.norm())
        return float(torch.linalg.eigvalsh(hess)[-1])


def build_matrix_completion(spec: MatrixCompletionSpec, generator: torch.Generator) -> MatrixCompletionProblem:
    """Draw the truth and the observed entries (float64); γ, β from the observed targets."""
    n, r = spec.size, spec.rank
    a = torch.randn(n, r, generator=generator, dtype=torch.float64)
    b = torch.randn(n, r, generator=generator, dtype=torch.float64)
    truth = a @ b.T / r**0.5
    mask = torch.rand(n, n, generator=generator, dtype=torch.float64) < spec.observed
    if int(mask.sum()) < 2 or bool(mask.all()):
        raise ValueError("observed: the mask must hold at least two observed and one unobserved entry")
    y = truth[mask]
    return MatrixCompletionProblem(truth, mask, float(y.std(unbiased=False)), float(y.mean()), spec)


def initial_weights(problem: MatrixCompletionProblem, generator: torch.Generator) -> torch.Tensor:
    """(U, V) flattened, entries N(0, init_scale²)."""
    n, k = problem.spec.size, problem.spec.factor_dim
    return problem.spec.init_scale * torch.randn(2 * n * k, generator=generator, dtype=torch.float64)


def effective_rank(matrix: torch.Tensor) -> float:
    """exp of the entropy of the normalized singular values (Roy & Vetterli 2007): r for r equal ones."""
    s = torch.linalg.svdvals(matrix)
    p = s[s > 0] / s.sum()
    return float(torch.exp(-(p * torch.log(p)).sum()))


@dataclass(frozen=True)
class CompletionRun:
    """Logged quantities of one GD(+WD) run at the logged steps."""

    steps: np.ndarray
    train_loss: np.ndarray
    test_loss: np.ndarray
    sharpness: np.ndarray
    effective_rank: np.ndarray
    eos: np.ndarray  # η̃_t · spherical sharpness, η̃ = η / ((1 − ηλ)‖w_t‖²): 2 at the Edge of Stability
    w: torch.Tensor

    def first_fit(self, level: float) -> int | None:
        """Index of the first log with train loss ≤ ``level`` (None: never)."""
        hit = np.flatnonzero(self.train_loss <= level)
        return int(hit[0]) if len(hit) else None


def gd_weight_decay(
    problem: MatrixCompletionProblem,
    w0: torch.Tensor,
    *,
    lr: float,
    weight_decay: NonNegativeFloat,
    steps: int,
    log_every: int,
) -> CompletionRun:
    """``w ← (1 − ηλ) w − η ∇L(w)`` (Lyu et al., Eq. 1); ``weight_decay = 0`` is plain GD.

    Logs every ``log_every | 1`` steps (odd, so logs alternate the phases of an Edge-of-Stability
    2-cycle) and at the last step.
    """
    log_every |= 1
    shrink = 1 - lr * weight_decay
    w = w0.clone()
    rows, logged = [], []
    last_finite = float("nan")
    for t in range(steps + 1):
        if t % log_every == 0 or t == steps:
            with torch.no_grad():
                train = float(problem.train_loss(w))
                last_finite = check_finite(t, train, w, last_finite)
                sharp = problem.spherical_sharpness(w)
                rows.append(
                    (
                        train,
                        float(problem.test_loss(w)),
                        sharp,
                        effective_rank(problem.product(w)),
                        lr / (shrink * float(w.norm()) ** 2) * sharp,
                    )
                )
            logged.append(t)
        if t < steps:  # autograd: ~2x faster per step than torch.func.grad at this size
            w.requires_grad_(True)
            (grad,) = torch.autograd.grad(problem.train_loss(w), w)
            w = shrink * w.detach() - lr * grad
    cols = np.array(rows).T
    return CompletionRun(np.array(logged), *cols, w=w)
