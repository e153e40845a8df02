"""The experiments of Lyu, Li, Arora 2022 on scale-invariant losses: identities, GD+WD runs and their limits.

Scale invariance L(cw) = L(w) gives ⟨∇L(w), w⟩ = 0, ∇L(cw) = ∇L(w)/c and ∇²L(cw) = ∇²L(w)/c²
(§3), and one GD+WD step w' = (1 − ηλ)w − η∇L(w) is a projected step on the sphere with the
effective rate η̃ = η/((1 − ηλ)‖w‖²) and ‖w'‖² = (1 − ηλ)²‖w‖² + η²‖∇L(w)‖² (Lemma 3.1). The
runs are on the BN linear regression of :mod:`constructions.bn_regression` (closed forms, all
inits in one tensor program) and on a two-layer net with BatchNorm.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from constructions import symmetries
from constructions.bn_regression import (
    BNRegressionProblem,
    Trajectory,
    cosine_to_min_norm,
    gradient_descent,
    spherical_sharpness_per_row,
)
from constructions.identity_checks import relative_error
from constructions.mlp_regression import build_mlp_regression
from constructions.specs import MLPRegressionSpec
from constructions.training import ScaleInvariantRun, gd_weight_decay_scale_invariant
from evaluators import Objective

__all__ = [
    "bn_net_run",
    "cycle_midpoint",
    "effective_lr_errors",
    "reduction_after_entry",
    "final_alignment",
    "hitting_time",
    "interpolant_sharpness",
    "plain_least_squares",
    "run_gd",
    "scale_invariance_errors",
    "sharpness_after_small_loss",
    "steps_for",
    "equivalent_linear_mse",
]


def scale_invariance_errors(obj: Objective, invariant: list[str], theta: torch.Tensor, c: float) -> dict[str, float]:
    """Relative violations of the four identities for scaling the ``invariant`` parameters by c."""
    idx = torch.cat([torch.arange(obj.num_params)[obj.param_slice(n)] for n in invariant])
    scaled = theta.clone()
    scaled[idx] *= c
    loss, grad = obj.loss_and_grad(theta)
    loss_c, grad_c = obj.loss_and_grad(scaled)
    h, h_c = obj.hessian(theta)[idx][:, idx], obj.hessian(scaled)[idx][:, idx]
    w = theta[idx]
    return {
        "loss": abs(loss_c - loss) / abs(loss),
        "euler": abs(float(grad[idx] @ w)) / (float(grad[idx].norm() * w.norm())),
        "gradient": relative_error(grad_c[idx], grad[idx] / c),
        "hessian": relative_error(h_c, h / c**2),
    }


def plain_least_squares(problem: BNRegressionProblem) -> Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    """L(w) = mean((xᵀw + β − y)²) on the same data: no normalization, so not scale-invariant."""
    x, y = problem.data.x, problem.data.y

    def loss_and_grad(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        r = x @ w + problem.beta - y
        return (r**2).mean(), 2 * x.T @ r / len(y)

    return loss_and_grad


def effective_lr_errors(loss_and_grad: Callable, w: torch.Tensor, lr: float, weight_decay: float, steps: int) -> dict:
    """Lemma 3.1 checked step by step along GD+WD: the direction of each step against the projected
    step with η̃ (relative error of the unit vectors) and the norm recursion (relative error)."""
    direction, norm_recursion = [], []
    for _ in range(steps):
        _, g = loss_and_grad(w)
        w_next = (1 - lr * weight_decay) * w - lr * g
        norm = w.norm()
        w_bar = w / norm
        _, g_bar = loss_and_grad(w_bar)
        step = w_bar - lr / ((1 - lr * weight_decay) * norm**2) * g_bar
        direction.append(relative_error(w_next / w_next.norm(), step / step.norm()))
        predicted = (1 - lr * weight_decay) ** 2 * norm**2 + lr**2 * g.norm() ** 2
        norm_recursion.append(abs(float(w_next.norm() ** 2 - predicted)) / float(predicted))
        w = w_next
    return {"direction": direction, "norm_recursion": norm_recursion, "w": w}


def steps_for(horizon: float, lr: float, weight_decay: float) -> int:
    """``horizon / (ηλ)`` steps, rounded: Lyu et al.'s time unit is 1/(ηλ)."""
    return int(round(horizon / (lr * weight_decay)))


def run_gd(problem, w0, *, lr: float, weight_decay: float, steps: int, log_points: int) -> Trajectory:
    """GD(+WD) from every row of ``w0`` for ``steps`` steps, about ``log_points`` logs."""
    return gradient_descent(
        problem, w0, lr=lr, weight_decay=weight_decay, steps=steps, log_every=max(1, steps // log_points)
    )


def cycle_midpoint(problem: BNRegressionProblem, w: torch.Tensor, lr: float, weight_decay: float) -> torch.Tensor:
    """The midpoint of the directions of w and its next GD+WD iterate (rows).

    At the Edge of Stability the iterates 2-cycle across the interpolating manifold; the limit the
    theory speaks of is the manifold point between them, not either end of the cycle.
    """
    _, g = problem.loss_and_grad(w)
    w_next = (1 - lr * weight_decay) * w - lr * g
    return w / w.norm(dim=1, keepdim=True) + w_next / w_next.norm(dim=1, keepdim=True)


def bn_net_run(
    spec: MLPRegressionSpec,
    generator: torch.Generator,
    *,
    init_scale: float,
    lr: float,
    weight_decay: float,
    steps: int,
    log_points: int,
) -> ScaleInvariantRun:
    """GD+WD on the weights feeding the BatchNorm of a two-layer net (the output layer fixed), started
    with those weights ×``init_scale`` (same function, η̃ smaller by its square)."""
    problem = build_mlp_regression(spec, generator)
    net = symmetries.scale_before_normalization(problem.model, 0, init_scale)
    obj = Objective(net, (problem.data.x, problem.data.y))
    return gd_weight_decay_scale_invariant(
        obj,
        ["0.weight", "0.bias"],
        lr=lr,
        weight_decay=weight_decay,
        steps=steps,
        log_every=max(1, steps // log_points),
    )


def interpolant_sharpness(problem: BNRegressionProblem, gen: torch.Generator, samples: int) -> tuple[float, float]:
    """Spherical sharpness at the min-norm interpolant's direction, and the least found at random interpolants."""
    w_mn, _ = problem.min_norm_interpolant()
    s_min = float(spherical_sharpness_per_row(problem, w_mn[None])[0])
    xc = problem.data.x - problem.data.x.mean(0)
    null = torch.eye(len(w_mn), dtype=torch.float64) - torch.linalg.pinv(xc) @ xc
    scales = torch.logspace(-2, 1, samples, dtype=torch.float64)[:, None] * w_mn.norm()
    others = w_mn + scales * (torch.randn(samples, len(w_mn), generator=gen, dtype=torch.float64) @ null)
    return s_min, float(spherical_sharpness_per_row(problem, others).min())


def final_alignment(problem: BNRegressionProblem, w: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """cos(w̃, w_min-norm) and ‖w̃‖ / ‖w_min-norm‖ for each row of ``w``."""
    w_mn, _ = problem.min_norm_interpolant()
    w_t, _ = problem.equivalent_linear(w)
    return cosine_to_min_norm(problem, w).numpy(), (w_t.norm(dim=-1) / w_mn.norm()).numpy()


def hitting_time(traj: Trajectory, lr: float, weight_decay: float, cos_at_least: float) -> float | None:
    """The first rescaled time ηλt at which every run's cosine to the min-norm interpolant is ≥ ``cos_at_least``."""
    reached = np.flatnonzero(traj.cos.min(axis=1) >= cos_at_least)
    return float(traj.steps[reached[0]] * lr * weight_decay) if len(reached) else None


def sharpness_after_small_loss(frozen: Trajectory, moving: Trajectory, small_loss: float) -> tuple[list, list]:
    """From the first log where ``frozen``'s loss is ≤ ``small_loss`` (per run): the relative range of
    its spherical sharpness, and the relative decrease of ``moving``'s over the same window."""
    changes, reductions = [], []
    for i in range(frozen.loss.shape[1]):
        small = np.argmax(frozen.loss[:, i] <= small_loss)
        if frozen.loss[small, i] > small_loss:
            raise RuntimeError("GD without WD did not reach the small-loss phase; raise horizon")
        seg = frozen.sharpness[small:, i]
        changes.append(float((seg.max() - seg.min()) / seg[0]))
        reductions.append(float(1 - moving.sharpness[-1, i] / moving.sharpness[small, i]))
    return changes, reductions


def equivalent_linear_mse(problem: BNRegressionProblem, w: torch.Tensor, x_test: torch.Tensor, y_test: torch.Tensor):
    """Mean squared error of each row's equivalent linear model on (x_test, y_test)."""
    w_t, b_t = problem.equivalent_linear(w)
    return ((x_test @ w_t.T + b_t - y_test[:, None]) ** 2).mean(dim=0)


def reduction_after_entry(traj: Trajectory, final_sharpness: np.ndarray, tolerance: float, entry: float = 1.8):
    """Per run: spherical sharpness at the start, at the first log with η̃λ1 ≥ ``entry`` and at the end
    (``final_sharpness``, e.g. at the 2-cycle's midpoint); whether the means of four windows after
    entry never rise by more than ``tolerance`` (relative), and whether the run reached the edge."""
    entered = np.argmax(traj.eos >= entry, axis=0)  # first log at the edge, per run
    runs = []
    for i in range(traj.sharpness.shape[1]):
        windows = [w.mean() for w in np.array_split(traj.sharpness[entered[i] :, i], 4) if len(w)]
        runs.append(
            {
                "start": traj.sharpness[0, i],
                "at_entry": traj.sharpness[entered[i], i],
                "final": float(final_sharpness[i]),
                "decreasing": all(b <= a * (1 + tolerance) for a, b in zip(windows, windows[1:], strict=False)),
                "reached": bool(traj.eos[:, i].max() >= entry),
            }
        )
    return runs
