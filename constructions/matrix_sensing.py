"""Deep matrix factorization on matrix sensing (Gatmiry, Li, Chuang, Reddi, Ma, Jegelka 2023).

A rank-``r`` truth ``M* = U Vᵀ`` (``d × d``) is seen through ``n`` Gaussian measurements
``b_i = ⟨A_i, M*⟩`` (``A_i`` with i.i.d. N(0, 1) entries: the RIP regime once n ≳ r d). The
model is a depth-L linear net, its end-to-end matrix ``M(θ) = W_L ⋯ W_1`` (every ``W_j`` d × d),
and the loss ``L(θ) = (1/2n) Σ_i (⟨A_i, M(θ)⟩ − b_i)²``. Each residual is linear in each factor,
so its own Hessian has a zero diagonal and the Hessian trace is the Gauss–Newton one at every θ
(docs/derivations.md §10):

    Tr ∇²L = (1/n) Σ_i Σ_j ‖P_jᵀ A_i Q_jᵀ‖_F²,   P_j = W_L ⋯ W_{j+1},  Q_j = W_{j−1} ⋯ W_1.

Depth 1: ``(1/n) Σ_i ‖A_i‖_F²`` whatever the interpolator (no implicit bias). Depth 2: the
minimum over factorizations of ``M`` is ``2 ‖S^{1/2} M T^{1/2}‖_*`` with ``S = (1/n) Σ A_i A_iᵀ``,
``T = (1/n) Σ A_iᵀ A_i``, so the flattest depth-2 interpolator solves a convex weighted
nuclear-norm program, which :func:`min_trace_depth2` solves with a duality certificate.
:func:`search_min_trace` is the nonconvex search any depth allows: an augmented Lagrangian on the
trace subject to interpolation, from random starts, finished by Gauss–Newton projections onto the
interpolating set.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from pydantic import Field

from constructions.specs import PositiveInt, Spec

__all__ = [
    "INTERPOLATES",
    "MatrixSensingSpec",
    "NuclearSolve",
    "SensingProblem",
    "TraceSearchResult",
    "build_sensing",
    "end_to_end",
    "gauss_newton_trace",
    "min_frobenius_interpolator",
    "min_nuclear_norm",
    "min_trace_depth2",
    "search_min_trace",
    "sensing_loss",
]


INTERPOLATES = 1e-20  # (1/2n) Σ residual² at or below this: an interpolator to round-off (projections reach ≈1e-29)


class MatrixSensingSpec(Spec):
    """The truth's size and rank and the number of measurements."""

    size: PositiveInt = Field(default=10, description="d: the matrices are d × d")
    rank: PositiveInt = 1
    measurements: PositiveInt = Field(default=60, description="n Gaussian measurements (d² would determine M)")


@dataclass(frozen=True)
class SensingProblem:
    """Measurement matrices ``a`` (n, d, d), the truth and the measurements ``b = 𝒜(M*)``."""

    a: torch.Tensor
    truth: torch.Tensor
    b: torch.Tensor

    @property
    def operator(self) -> torch.Tensor:
        """𝒜 as an n × d² matrix acting on row-major vec(M)."""
        return self.a.reshape(len(self.a), -1)


def build_sensing(spec: MatrixSensingSpec, generator: torch.Generator) -> SensingProblem:
    """Gaussian A_i and ``M* = U Vᵀ / ‖U Vᵀ‖_F`` with U, V standard normal (d × r), float64."""
    d, r, n = spec.size, spec.rank, spec.measurements
    if n >= d * d:
        raise ValueError(f"measurements must be < size² = {d * d} (more determine M outright), got {n}")
    u = torch.randn(d, r, generator=generator, dtype=torch.float64)
    v = torch.randn(d, r, generator=generator, dtype=torch.float64)
    truth = u @ v.T
    truth = truth / truth.norm()
    a = torch.randn(n, d, d, generator=generator, dtype=torch.float64)
    return SensingProblem(a, truth, torch.einsum("nij,ij->n", a, truth))


def end_to_end(ws: list[torch.Tensor]) -> torch.Tensor:
    """``W_L ⋯ W_1`` for ``ws = [W_1, …, W_L]``."""
    out = ws[0]
    for w in ws[1:]:
        out = w @ out
    return out


def sensing_loss(ws: list[torch.Tensor], problem: SensingProblem) -> torch.Tensor:
    """``(1/2n) Σ_i (⟨A_i, M(θ)⟩ − b_i)²``."""
    return 0.5 * _constraint(ws, problem).pow(2).mean()


def gauss_newton_trace(ws: list[torch.Tensor], a: torch.Tensor) -> torch.Tensor:
    """``(1/n) Σ_i Σ_j ‖P_jᵀ A_i Q_jᵀ‖_F²``: the Hessian trace of the loss at every θ (module docstring)."""
    d = ws[0].shape[1]
    eye = torch.eye(d, dtype=ws[0].dtype)
    total = ws[0].new_zeros(())
    for j in range(len(ws)):
        p = end_to_end(ws[j + 1 :]) if j + 1 < len(ws) else eye
        q = end_to_end(ws[:j]) if j > 0 else eye
        total = total + (p.T @ a @ q.T).pow(2).sum()
    return total / len(a)


@dataclass(frozen=True)
class NuclearSolve:
    """A nuclear-norm program's solution: the interpolator, its objective and a certified lower bound."""

    matrix: torch.Tensor
    value: float  # the objective at ``matrix`` (an interpolator to round-off): an upper bound
    lower_bound: float  # b·y / ‖𝒜*y‖_op for the final dual y (weak duality)
    iterations: int  # ADMM iterations run (the kept iterate is the one with the smallest gap)

    @property
    def gap(self) -> float:
        """Relative duality gap (value − lower bound)/value: 0 certifies optimality."""
        return (self.value - self.lower_bound) / self.value


def min_nuclear_norm(
    a: torch.Tensor, b: torch.Tensor, *, tol: float = 1e-9, max_iter: int = 50_000, penalty: float | None = None
) -> NuclearSolve:
    """``min ‖M‖_*  s.t.  ⟨A_i, M⟩ = b_i`` by ADMM (singular-value thresholding against the affine
    projection), with the dual certificate ``max b·y s.t. ‖Σ y_i A_i‖_op ≤ 1``: for any y,
    ``b·y / ‖𝒜*y‖_op ≤ min ‖M‖_*`` (weak duality), so ``value − lower_bound`` bounds the error in
    the optimal value. Stops when the relative gap is ≤ ``tol``.
    """
    n, d, _ = a.shape
    op = a.reshape(n, -1).double().numpy()
    rhs = b.double().numpy()
    gram_inv = np.linalg.inv(op @ op.T)
    project = lambda w: w - (op.T @ (gram_inv @ (op @ w - rhs)))  # noqa: E731
    z = project(np.zeros(d * d))
    u = np.zeros(d * d)
    rho = penalty if penalty is not None else 1.0 / max(np.linalg.norm(z.reshape(d, d), 2), 1e-12)
    best = (np.inf, -np.inf, z)
    for it in range(1, max_iter + 1):
        uu, s, vt = np.linalg.svd((z - u).reshape(d, d))
        x = ((uu * np.maximum(s - 1.0 / rho, 0.0)) @ vt).reshape(-1)
        z = project(x + u)
        u = u + x - z
        if it % 10 == 0:
            value = np.linalg.svd(z.reshape(d, d), compute_uv=False).sum()
            # the scaled dual −ρu is a subgradient of ‖·‖_* at x; its least-squares 𝒜* preimage is a dual point
            y = np.linalg.lstsq(op.T, -rho * u, rcond=None)[0]
            lower = float(rhs @ y / np.linalg.norm((op.T @ y).reshape(d, d), 2))
            upper = float(value)
            if upper - lower < best[0] - best[1]:
                best = (upper, lower, z.copy())
            if (best[0] - best[1]) <= tol * best[0]:
                break
    upper, lower, z = best
    if not np.isfinite(upper):
        raise ValueError(f"max_iter must be ≥ 10 (the certificate is computed every 10 iterations), got {max_iter}")
    return NuclearSolve(torch.from_numpy(z.reshape(d, d)), upper, lower, it)


def _sqrt_and_inverse(m: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    evals, evecs = torch.linalg.eigh(m)
    return (evecs * evals.sqrt()) @ evecs.T, (evecs / evals.sqrt()) @ evecs.T


def min_trace_depth2(problem: SensingProblem, **solver) -> tuple[NuclearSolve, torch.Tensor]:
    """The flattest depth-2 interpolator, exactly: ``min 2 ‖S^{1/2} M T^{1/2}‖_* s.t. 𝒜(M) = b``.

    Substituting ``M' = S^{1/2} M T^{1/2}`` (``A_i' = S^{-1/2} A_i T^{-1/2}``) makes it a plain
    nuclear-norm program. Returns the solve in ``M'`` units with value and bound doubled (so they
    bound the minimum trace itself) and the end-to-end matrix ``M``.
    """
    a = problem.a
    s_half, s_inv_half = _sqrt_and_inverse(torch.einsum("nij,nkj->ik", a, a) / len(a))
    t_half, t_inv_half = _sqrt_and_inverse(torch.einsum("nji,njk->ik", a, a) / len(a))
    solve = min_nuclear_norm(s_inv_half @ a @ t_inv_half, problem.b, **solver)
    matrix = s_inv_half @ solve.matrix @ t_inv_half
    return NuclearSolve(solve.matrix, 2 * solve.value, 2 * solve.lower_bound, solve.iterations), matrix


def min_frobenius_interpolator(problem: SensingProblem) -> torch.Tensor:
    """``argmin ‖M‖_F s.t. 𝒜(M) = b``: where gradient descent on M from zero goes (depth 1)."""
    op = problem.operator
    d = problem.truth.shape[0]
    return (op.T @ torch.linalg.solve(op @ op.T, problem.b)).reshape(d, d)


@dataclass(frozen=True)
class TraceSearchResult:
    """The flattest interpolator found: its trace, residual, factors, and every start's trace."""

    smallest_trace: float
    residual: float  # (1/2n) Σ residual² at the smallest
    starts: int
    trace_per_start: list[float]
    factors: list[torch.Tensor]

    @property
    def matrix(self) -> torch.Tensor:
        return end_to_end(self.factors)


def _constraint(ws: list[torch.Tensor], problem: SensingProblem) -> torch.Tensor:
    """``c(θ) = 𝒜(M(θ)) − b``."""
    return torch.einsum("nij,ij->n", problem.a, end_to_end(ws)) - problem.b


def _split(theta: torch.Tensor, shapes: list[torch.Size]) -> list[torch.Tensor]:
    parts = torch.split(theta, [s.numel() for s in shapes])
    return [part.reshape(shape) for part, shape in zip(parts, shapes, strict=True)]


def _project_to_interpolation(ws: list[torch.Tensor], problem: SensingProblem, steps: int = 20) -> list[torch.Tensor]:
    """Gauss–Newton least-norm steps θ ← θ − Jᵀ(J Jᵀ)⁻¹ c(θ) onto ``𝒜(M(θ)) = b``."""
    shapes = [w.shape for w in ws]
    theta = torch.cat([w.reshape(-1) for w in ws])
    scale = max(1.0, float(problem.b.abs().max()))
    for _ in range(steps):
        c = _constraint(_split(theta, shapes), problem)
        if float(c.abs().max()) <= 1e-13 * scale:
            break
        jac = torch.autograd.functional.jacobian(lambda t: _constraint(_split(t, shapes), problem), theta)
        theta = theta - jac.T @ torch.linalg.solve(jac @ jac.T, c)
    return [w.clone() for w in _split(theta, shapes)]


def _augmented_lagrangian(ws: list[torch.Tensor], problem: SensingProblem, outer: int, inner: int) -> None:
    """``min T(θ) + yᵀc + (μ/2)‖c‖²`` by L-BFGS, then ``y += μ c``, ``μ ×= 3``, ``outer`` times (in place)."""
    y = torch.zeros(len(problem.b), dtype=torch.float64)
    mu = 10.0
    for _ in range(outer):
        opt = torch.optim.LBFGS(ws, max_iter=inner, line_search_fn="strong_wolfe", tolerance_grad=1e-12)

        def lagrangian(opt=opt, y=y, mu=mu):
            opt.zero_grad()
            c = _constraint(ws, problem)
            value = gauss_newton_trace(ws, problem.a) + y @ c + 0.5 * mu * c.pow(2).sum()
            value.backward()
            return value

        opt.step(lagrangian)
        with torch.no_grad():
            y = y + mu * _constraint(ws, problem)
        mu *= 3.0


def _descend_trace(ws: list[torch.Tensor], problem: SensingProblem, inner: int) -> None:
    """The control's descent: the trace alone, no constraint (in place)."""
    opt = torch.optim.LBFGS(ws, max_iter=inner, line_search_fn="strong_wolfe", tolerance_grad=1e-12)

    def trace():
        opt.zero_grad()
        value = gauss_newton_trace(ws, problem.a)
        value.backward()
        return value

    opt.step(trace)


def search_min_trace(
    problem: SensingProblem,
    depth: int,
    *,
    starts: int,
    generator: torch.Generator,
    init_scale: float = 0.5,
    outer: int = 12,
    inner: int = 200,
    interpolate: bool = True,
) -> TraceSearchResult:
    """Minimize the Gauss–Newton trace over interpolators of the depth-``depth`` net from ``starts``
    random Gaussian factorizations (entries N(0, init_scale²/d)).

    An augmented Lagrangian ``T(θ) + yᵀc + (μ/2)‖c‖²`` (``c = 𝒜(M(θ)) − b``; L-BFGS inside, μ ×3
    per outer round), then Gauss–Newton projections onto ``c = 0``: the result interpolates to
    round-off, and its trace is an upper bound on the minimum over interpolators. ``interpolate=False``
    is the control: the trace alone, unconstrained, which falls towards 0 at θ = 0.
    """
    d = problem.truth.shape[0]
    found = []
    for _ in range(starts):
        ws = [
            (init_scale / d**0.5 * torch.randn(d, d, generator=generator, dtype=torch.float64)).requires_grad_(True)
            for _ in range(depth)
        ]
        if interpolate:
            _augmented_lagrangian(ws, problem, outer, inner)
            factors = _project_to_interpolation([w.detach() for w in ws], problem)
        else:
            _descend_trace(ws, problem, inner)
            factors = [w.detach().clone() for w in ws]
        with torch.no_grad():
            found.append(
                (float(gauss_newton_trace(factors, problem.a)), float(sensing_loss(factors, problem)), factors)
            )
    interpolating = [f for f in found if f[1] <= INTERPOLATES] or found  # a failed projection never wins
    smallest, residual, factors = min(interpolating, key=lambda f: f[0])
    return TraceSearchResult(smallest, residual, starts, [f[0] for f in found], factors)
