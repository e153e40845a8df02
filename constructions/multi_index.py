"""Multi-index data and interpolators of two-layer homogeneous nets (Vardhan, Taheri, Mazumdar 2026).

The student is ``f(x) = Σ_j a_j σ(θ_jᵀx)`` with σ = ReLU^c. Interpolators are built on fixed
inner directions, with the outer weights that make them flattest among all interpolators on those
directions (``evaluators.interpolation_bounds.min_weighted_lp``), so Υ compares feature sets.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from constructions.specs import MultiIndexSpec
from evaluators.interpolation_bounds import LpInterpolation, homogeneous_features, min_weighted_lp

__all__ = [
    "MultiIndexProblem",
    "build_multi_index",
    "Interpolator",
    "aligned_interpolator",
    "flattest_on_directions",
    "misaligned_directions",
    "optimize_flattest",
    "random_directions",
    "teacher_dictionary",
    "noiseless",
]


def relu_power(z: np.ndarray, c: int) -> np.ndarray:
    return np.maximum(z, 0.0) ** c


@dataclass(frozen=True)
class MultiIndexProblem:
    spec: MultiIndexSpec
    x: np.ndarray  # (n, d)
    y: np.ndarray  # (n,)
    theta_star: np.ndarray  # (m*, d), orthonormal rows

    def labels(self, x: np.ndarray) -> np.ndarray:
        """Noiseless σ*(Θ* x)."""
        z = x @ self.theta_star.T
        if self.spec.link == "single_index":
            return relu_power(z[:, 0], self.spec.c)
        if self.spec.link == "sum_single_index":
            return relu_power(z, self.spec.c).mean(axis=1)
        return z[:, 0] * z[:, 1]

    def sample(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """n fresh (x, y) pairs, with the label noise (an ``evaluators.Distribution``)."""
        x = torch.randn(n, self.spec.d, generator=generator, dtype=torch.float64)
        noise = torch.randn(n, generator=generator, dtype=torch.float64)
        return x, torch.from_numpy(self.labels(x.numpy())) + self.spec.noise * noise

    def support_size(self) -> None:
        return None  # Gaussian inputs: population quantities are Monte Carlo estimates

    def support(self) -> None:
        return None


def build_multi_index(spec: MultiIndexSpec, generator: torch.Generator) -> MultiIndexProblem:
    if spec.link == "product" and spec.m_star < 2:
        raise ValueError("link 'product' needs m_star ≥ 2")
    if spec.m_star > spec.d:
        raise ValueError("m_star must be ≤ d")
    g = torch.randn(spec.d, spec.m_star, generator=generator, dtype=torch.float64).numpy()
    theta_star = np.linalg.qr(g)[0].T
    x = torch.randn(spec.n, spec.d, generator=generator, dtype=torch.float64).numpy()
    problem = MultiIndexProblem(spec, x, np.zeros(spec.n), theta_star)
    noise = torch.randn(spec.n, generator=generator, dtype=torch.float64).numpy()
    return MultiIndexProblem(spec, x, problem.labels(x) + spec.noise * noise, theta_star)


@dataclass(frozen=True)
class Interpolator:
    """Inner weights (unit rows), outer weights, and Υ with its duality certificate."""

    theta: np.ndarray
    a: np.ndarray
    upsilon: float
    solution: LpInterpolation | None
    scale: float  # C_c: Υ = scale · (Σ κ_j |u_j|^p)

    def predict(self, x: np.ndarray, c: int) -> np.ndarray:
        return relu_power(np.asarray(x) @ self.theta.T, c) @ self.a

    def predictor(self, c: int):
        """f as a function of a torch batch (for ``evaluators.population_loss``)."""
        return lambda x: torch.from_numpy(self.predict(x.numpy(), c))


def flattest_on_directions(problem: MultiIndexProblem, theta: np.ndarray) -> Interpolator:
    """The flattest interpolator whose inner directions are the rows of ``theta`` (normalized)."""
    c = problem.spec.c
    theta = theta / np.linalg.norm(theta, axis=1, keepdims=True)
    features, kappa, scale = homogeneous_features(theta, problem.x, c)
    sol = min_weighted_lp(features, problem.y, kappa, 2 * c / (c + 1))
    return Interpolator(theta, sol.a, scale * sol.primal, sol, scale)


def aligned_interpolator(problem: MultiIndexProblem, width: int | None = None) -> Interpolator:
    """The teacher (noiseless single / sum-of-single-index data): neurons on Θ*, outer weights 1/m*.

    With ``width = m`` each teacher neuron is split evenly over ``m // m*`` identical copies (outer
    weight divided by the number of copies): the same function, and for p = 2c/(c+1) > 1 a smaller
    Υ by the factor ``(m/m*)^{1−p}``, since Σ_j κ|u_j|^p with κ equal across copies is minimized by
    an equal split. For c = 1 (p = 1) splitting changes nothing.
    """
    if problem.spec.link == "product" or problem.spec.noise > 0:
        raise ValueError("the aligned teacher interpolates only noiseless (sum of) single-index data")
    c = problem.spec.c
    m_star = len(problem.theta_star)
    copies = 1 if width is None else max(1, width // m_star)
    theta = np.repeat(problem.theta_star, copies, axis=0)
    _, kappa, scale = homogeneous_features(theta, problem.x, c)
    a = np.full(len(theta), 1.0 / (m_star * copies))
    return Interpolator(theta, a, scale * float(np.sum(kappa * np.abs(a) ** (2 * c / (c + 1)))), None, scale)


def misaligned_directions(problem: MultiIndexProblem, m: int, rho: float, generator: torch.Generator) -> np.ndarray:
    """m unit directions ``ρ θ*_1 + √(1−ρ²) v_j`` with v_j uniform on the sphere of span(Θ*)^⊥.

    Their span is misaligned with span(Θ*) by ρ* = ρ (Def. 2 of the paper); ρ = 0 gives features
    independent of the labels.
    """
    d = problem.spec.d
    g = torch.randn(m, d, generator=generator, dtype=torch.float64).numpy()
    g -= (g @ problem.theta_star.T) @ problem.theta_star
    v = g / np.linalg.norm(g, axis=1, keepdims=True)
    return rho * problem.theta_star[0][None, :] + np.sqrt(1 - rho**2) * v


def random_directions(problem: MultiIndexProblem, m: int, generator: torch.Generator) -> np.ndarray:
    """m directions uniform on the sphere (random features)."""
    g = torch.randn(m, problem.spec.d, generator=generator, dtype=torch.float64).numpy()
    return g / np.linalg.norm(g, axis=1, keepdims=True)


def teacher_dictionary(problem: MultiIndexProblem, m: int, generator: torch.Generator) -> np.ndarray:
    """The rows of Θ* followed by m random unit directions.

    The flattest interpolator over this dictionary (:func:`flattest_on_directions`, certified by
    its duality gap) stands in for the flattest one: its Υ is an upper bound on the infimum over
    all directions, and the convex program is free to leave Θ* unused when random directions
    interpolate more flatly.
    """
    return np.vstack([problem.theta_star, random_directions(problem, m, generator)])


def noiseless(problem: MultiIndexProblem) -> MultiIndexProblem:
    """The same problem with label noise 0, to measure excess population loss E(f − σ*(Θ*x))²."""
    return replace(problem, spec=problem.spec.model_copy(update={"noise": 0.0}))


def _upsilon_gradient(problem: MultiIndexProblem, theta: np.ndarray, interp: Interpolator) -> np.ndarray:
    """∇_θ Υ by the envelope theorem: the gradient of the Lagrangian
    ``C (Σ_j κ_j(θ)|u_j|^p − λᵀ(U(θ) u − y))`` at the optimal (u, λ), which are held fixed."""
    c = problem.spec.c
    p = 2 * c / (c + 1)
    x = torch.from_numpy(problem.x)
    th = torch.from_numpy(theta).requires_grad_(True)
    unit = th / th.norm(dim=1, keepdim=True)
    z = x @ unit.T
    act = torch.relu(z) ** c
    deriv = (z > 0).double() if c == 1 else c * torch.relu(z) ** (c - 1)
    kappa = (act**2).sum(0) ** (1 / (c + 1)) * (deriv**2 * (x**2).sum(1, keepdim=True)).sum(0) ** (c / (c + 1))
    u = torch.from_numpy(interp.solution.a)
    lam = torch.from_numpy(interp.solution.lam)
    lagrangian = (kappa * u.abs() ** p).sum() - lam @ (act @ u - torch.from_numpy(problem.y))
    (grad,) = torch.autograd.grad(interp.scale * lagrangian, th)
    return grad.numpy()


def optimize_flattest(
    problem: MultiIndexProblem, theta0: np.ndarray, *, steps: int = 40, step_size: float = 0.05
) -> tuple[Interpolator, list[float]]:
    """Search for the flattest interpolator: alternate the convex step (best outer weights for the
    current directions, :func:`flattest_on_directions`) with a gradient step on the directions.

    The direction gradient is exact for the value function Υ(θ) = min_u {…} (envelope theorem);
    a step is kept only if Υ decreases (else it is halved), so Υ is monotone along the search.
    Returns the final interpolator and the Υ history.
    """
    theta = theta0 / np.linalg.norm(theta0, axis=1, keepdims=True)
    best = flattest_on_directions(problem, theta)
    history = [best.upsilon]
    lr = step_size
    for _ in range(steps):
        grad = _upsilon_gradient(problem, best.theta, best)
        gnorm = np.linalg.norm(grad)
        if gnorm == 0:
            break
        for _ in range(8):  # backtracking on the step length
            trial = best.theta - lr * grad / gnorm * np.sqrt(len(theta))
            cand = flattest_on_directions(problem, trial)
            if cand.upsilon < best.upsilon:
                best, lr = cand, lr * 1.5
                break
            lr /= 2
        else:
            break
        history.append(best.upsilon)
    return best, history
