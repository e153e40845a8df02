"""Lyu, Li, Arora 2022 §5: linear regression through a BatchNorm layer.

Closed forms (``z = Xw``, centred ``z_c = z − μ1``, ``σ1 = ‖z_c‖/√n``, ``u = z_c/σ1``):

* ``L(w) = (1/n) ‖γ u + β − y‖²``;
* ``∇L(w) = (2γ/(n σ1)) X_cᵀ (I − u uᵀ/n) r``, ``r = γ u + β − y``, ``X_c`` the centred inputs;
* the equivalent linear model ``w̃ = γ w / ‖w‖_Σ``, ``b̃ = β − w̃ᵀ μ_x`` with Σ the (1/n)
  training covariance, so that ``Φ(x; w) = w̃ᵀx + b̃`` on every input.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch

from constructions.data import Dataset, gaussian_inputs, linear_teacher
from constructions.divergence import check_finite
from constructions.nets import BNLinearRegression
from constructions.specs import BNLinearRegressionSpec

__all__ = [
    "BNRegressionProblem",
    "Trajectory",
    "build_bn_regression",
    "cosine_to_min_norm",
    "gradient_descent",
    "gradient_flow",
    "spherical_sharpness_per_row",
]


@dataclass(frozen=True)
class BNRegressionProblem:
    """Training data, fixed γ = std(y), β = mean(y), and the teacher."""

    data: Dataset
    gamma: float
    beta: float
    w_star: torch.Tensor
    spec: BNLinearRegressionSpec

    def fresh_samples(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """n new (x, y) pairs from the same inputs distribution and teacher (test data)."""
        x = gaussian_inputs(n, self.spec.d, generator, anisotropic=self.spec.inputs == "anisotropic")
        noise = self.spec.noise * torch.randn(n, generator=generator, dtype=torch.float64)
        return x, x @ self.w_star + self.spec.intercept + noise

    def model(self, w: torch.Tensor) -> BNLinearRegression:
        return BNLinearRegression(w, self.gamma, self.beta)

    def loss(self, w: torch.Tensor) -> torch.Tensor:
        """L(w) for one w (shape (d,)) or a batch of them (shape (k, d) → (k,))."""
        return self.loss_and_grad(w)[0]

    @cached_property
    def centred_inputs(self) -> torch.Tensor:
        """``X_c``, the inputs minus their training mean."""
        return self.data.x - self.data.x.mean(dim=0)

    def loss_and_grad(self, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Closed-form L(w) and ∇L(w), batched over the leading dimension of ``w``."""
        y, xc = self.data.y, self.centred_inputs
        n = xc.shape[0]
        zc = w @ xc.T  # (..., n)
        sigma = zc.norm(dim=-1, keepdim=True) / n**0.5
        u = zc / sigma
        r = self.gamma * u + self.beta - y
        loss = (r**2).mean(dim=-1)
        proj = r - u * (u * r).sum(dim=-1, keepdim=True) / n
        grad = (2 * self.gamma / (n * sigma)) * (proj @ xc)
        return loss, grad

    def gradient(self, w: np.ndarray) -> np.ndarray:
        """∇L(w) for numpy rows ``w``: the same bits as :meth:`loss_and_grad`'s, at half its cost.

        GD runs 10⁵ steps on arrays of a few hundred entries, where torch's per-call overhead is the
        cost. Elementwise arithmetic is correctly rounded in both libraries, so it runs in numpy;
        matmuls and reductions, whose summation order sets the bits, stay in torch; torch's
        ``c / t`` is ``reciprocal(t) * c`` and is written so.
        """
        y, xc = self.data.y.numpy(), self.centred_inputs
        n = xc.shape[0]
        zc = torch.matmul(torch.from_numpy(w), xc.T)
        sigma = torch.linalg.vector_norm(zc, dim=-1, keepdim=True).numpy() / n**0.5
        u = zc.numpy() / sigma
        r = self.gamma * u + self.beta - y
        ur = torch.from_numpy(u * r).sum(dim=-1, keepdim=True).numpy()
        proj = r - u * ur / n
        return np.reciprocal(n * sigma) * (2 * self.gamma) * torch.matmul(torch.from_numpy(proj), xc).numpy()

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
    return BNRegressionProblem(Dataset(x, y), gamma, float(y.mean()), w_star, spec)


# --------------------------------------------------------------------------- training dynamics
@dataclass(frozen=True)
class Trajectory:
    """Logged quantities of k runs (columns) at the logged steps (rows).

    ``eff_lr`` is η̃_t = η/((1 − ηλ)‖w_t‖²) (for gradient flow, 1/‖w_t‖², the speed of the direction),
    ``sharpness`` the spherical sharpness λ1(∇²L(w_t/‖w_t‖)), ``cos`` the cosine between the
    equivalent linear weights w̃_t and the min-norm interpolant's.
    """

    steps: np.ndarray
    loss: np.ndarray
    norm: np.ndarray
    eff_lr: np.ndarray
    sharpness: np.ndarray
    cos: np.ndarray
    w: torch.Tensor  # final weights, (k, d)

    @property
    def eos(self) -> np.ndarray:
        """η̃_t · λ1(∇²L(w̄_t)): 2 at the Edge of Stability."""
        return self.eff_lr * self.sharpness


def spherical_sharpness_per_row(problem: BNRegressionProblem, w: torch.Tensor) -> torch.Tensor:
    """λ1(∇²L(w/‖w‖)) for each row of ``w`` (closed-form loss, Hessian by ``torch.func``)."""
    w_bar = w / w.norm(dim=-1, keepdim=True)
    hess = torch.func.vmap(torch.func.hessian(lambda v: problem.loss_and_grad(v)[0]))(w_bar)
    return torch.linalg.eigvalsh(hess)[:, -1]


def cosine_to_min_norm(problem: BNRegressionProblem, w: torch.Tensor) -> torch.Tensor:
    """cos(w̃, w_min-norm) for each row of ``w``."""
    w_mn, _ = problem.min_norm_interpolant()
    w_t, _ = problem.equivalent_linear(w)
    return (w_t @ w_mn) / (w_t.norm(dim=-1) * w_mn.norm())


def _log_row(problem, w, eff_lr):
    loss, _ = problem.loss_and_grad(w)
    return (
        loss.numpy(),
        w.norm(dim=-1).numpy(),
        eff_lr,
        spherical_sharpness_per_row(problem, w).numpy(),
        cosine_to_min_norm(problem, w).numpy(),
    )


def _trajectory(steps, rows, w) -> Trajectory:
    cols = [np.array(c) for c in zip(*rows, strict=True)]
    return Trajectory(np.array(steps), *cols, w=w)


def gradient_descent(
    problem: BNRegressionProblem,
    w0: torch.Tensor,
    *,
    lr: float,
    weight_decay: float,
    steps: int,
    log_every: int,
) -> Trajectory:
    """``w ← (1 − ηλ) w − η ∇L(w)`` for every row of ``w0`` at once (closed-form gradient).

    Logs every ``log_every | 1`` steps: an odd interval makes the logs alternate between the two
    phases of an Edge-of-Stability 2-cycle, so averages over logs average the cycle.
    """
    log_every |= 1
    w = w0.numpy().copy()
    shrink = 1 - lr * weight_decay
    log_steps, rows = [], []
    last_finite = float("nan")
    with torch.no_grad():
        for t in range(steps + 1):
            if t % log_every == 0 or t == steps:
                logged = torch.from_numpy(w)
                last_finite = check_finite(t, float(problem.loss(logged).max()), logged, last_finite)
                eff = (lr / (shrink * logged.norm(dim=-1) ** 2)).numpy()
                log_steps.append(t)
                rows.append(_log_row(problem, logged, eff))
            if t < steps:
                w = shrink * w - lr * problem.gradient(w)
    return _trajectory(log_steps, rows, torch.from_numpy(w))


def gradient_flow(
    problem: BNRegressionProblem,
    w0: torch.Tensor,
    *,
    weight_decay: float,
    t_end: float,
    n_log: int = 50,
    rtol: float = 1e-10,
) -> Trajectory:
    """``dw/dt = −∇L(w) − λw`` for each row of ``w0`` by ``solve_ivp`` (Radau with the exact Jacobian).

    The norm obeys ``‖w(t)‖² = ‖w0‖² e^{−2λt}`` exactly, so the direction moves with speed
    ``1/‖w‖²``: the flow grows stiff as t grows, hence the implicit solver.
    """
    from scipy.integrate import solve_ivp

    hess_fn = torch.func.hessian(lambda v: problem.loss_and_grad(v)[0])
    t_eval = np.linspace(0.0, t_end, n_log)
    finals, per_run = [], []
    for w_init in w0:

        def rhs(_t, y):
            return -problem.gradient(y) - weight_decay * y

        def jac(_t, y):
            return -hess_fn(torch.from_numpy(y)).numpy() - weight_decay * np.eye(len(y))

        sol = solve_ivp(
            rhs,
            (0.0, t_end),
            w_init.numpy(),
            method="Radau",
            jac=jac,
            t_eval=t_eval,
            rtol=rtol,
            atol=1e-12 * float(w_init.norm()),
        )
        if not sol.success:
            raise RuntimeError(f"gradient flow integration failed: {sol.message}")
        path = torch.from_numpy(sol.y.T)
        per_run.append(path)
        finals.append(path[-1])
    paths = torch.stack(per_run, dim=1)  # (n_log, k, d)
    rows = [_log_row(problem, paths[i], (1.0 / paths[i].norm(dim=-1) ** 2).numpy()) for i in range(len(t_eval))]
    return _trajectory(t_eval, rows, torch.stack(finals))
