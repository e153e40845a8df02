"""Lyu, Li, Arora 2022 §5: linear regression through a BatchNorm layer.

Closed forms (``z = Xw``, centred ``z_c = z − μ1``, ``σ1 = ‖z_c‖/√n``, ``u = z_c/σ1``):

* ``L(w) = (1/n) ‖γ u + β − y‖²``;
* ``∇L(w) = (2γ/(n σ1)) X_cᵀ (I − u uᵀ/n) r``, ``r = γ u + β − y``, ``X_c`` the centred inputs;
* the equivalent linear model ``w̃ = γ w / ‖w‖_Σ``, ``b̃ = β − w̃ᵀ μ_x`` with Σ the (1/n)
  training covariance, so that ``Φ(x; w) = w̃ᵀx + b̃`` on every input.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from constructions.data import Dataset, gaussian_inputs, linear_teacher
from constructions.nets import BNLinearRegression
from constructions.specs import BNLinearRegressionSpec

__all__ = ["BNRegressionProblem", "build_bn_regression"]


@dataclass(frozen=True)
class BNRegressionProblem:
    """Training data, fixed γ = std(y), β = mean(y), and the teacher."""

    data: Dataset
    gamma: float
    beta: float
    w_star: torch.Tensor

    def model(self, w: torch.Tensor) -> BNLinearRegression:
        return BNLinearRegression(w, self.gamma, self.beta)

    def loss(self, w: torch.Tensor) -> torch.Tensor:
        """L(w) for one w (shape (d,)) or a batch of them (shape (k, d) → (k,))."""
        return self.loss_and_grad(w)[0]

    def loss_and_grad(self, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Closed-form L(w) and ∇L(w), batched over the leading dimension of ``w``."""
        x, y = self.data.x, self.data.y
        n = x.shape[0]
        xc = x - x.mean(dim=0)
        zc = w @ xc.T  # (..., n)
        sigma = zc.norm(dim=-1, keepdim=True) / n**0.5
        u = zc / sigma
        r = self.gamma * u + self.beta - y
        loss = (r**2).mean(dim=-1)
        proj = r - u * (u * r).sum(dim=-1, keepdim=True) / n
        grad = (2 * self.gamma / (n * sigma)) * (proj @ xc)
        return loss, grad

    def equivalent_linear(self, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(w̃, b̃) with Φ(x; w) = w̃ᵀx + b̃ (batched over the leading dimension of w)."""
        x = self.data.x
        xc = x - x.mean(dim=0)
        sigma = (w @ xc.T).norm(dim=-1, keepdim=True) / x.shape[0] ** 0.5
        w_tilde = self.gamma * w / sigma
        return w_tilde, self.beta - w_tilde @ x.mean(dim=0)

    def min_norm_interpolant(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``argmin ‖w‖² s.t. wᵀx_i + b = y_i``: the min-norm solution on centred data."""
        x, y = self.data.x, self.data.y
        xc = x - x.mean(dim=0)
        w = torch.linalg.pinv(xc) @ (y - y.mean())
        return w, y.mean() - w @ x.mean(dim=0)


def build_bn_regression(spec: BNLinearRegressionSpec, generator: torch.Generator) -> BNRegressionProblem:
    """Draw inputs and teacher targets from ``spec``; γ, β as in the paper."""
    x = gaussian_inputs(spec.n, spec.d, generator, anisotropic=spec.inputs == "anisotropic")
    y, w_star = linear_teacher(x, generator, intercept=spec.intercept, noise=spec.noise)
    gamma = float(y.std(unbiased=False))
    return BNRegressionProblem(Dataset(x, y), gamma, float(y.mean()), w_star)
