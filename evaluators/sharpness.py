"""Sharpness around θ: ε-sharpness, adaptive sharpness and spherical sharpness.

Worst-case sharpness is a maximum over a neighbourhood, found by local ascent: what we return is
the value at the best point found, a certified *lower bound* on the true maximum
(``error_kind="lower_bound"``), together with the maximizer.
"""

from __future__ import annotations

import numpy as np
import torch
from scipy.optimize import minimize

from evaluators.estimate import Estimate, Stopwatch, mean_with_stderr, precision_of
from evaluators.objective import Objective
from evaluators.spectrum import extreme_estimate, hessian_spectrum

__all__ = ["epsilon_sharpness", "adaptive_sharpness", "spherical_sharpness", "adaptive_scale"]


def epsilon_sharpness(
    obj: Objective,
    eps: float,
    *,
    region: str = "keskar-box",
    maxiter: int = 100,
    theta: torch.Tensor | None = None,
) -> Estimate:
    """Keskar et al. (2017) ε-sharpness ``φ = 100 (max_{y ∈ C_ε} L(θ + y) − L(θ)) / (1 + L(θ))``.

    ``region="keskar-box"``: ``C_ε = {y : |y_i| ≤ ε (|θ_i| + 1)}``, maximized with L-BFGS-B
    (Keskar et al. ran ~10 iterations; we default to 100) from two starts, the centre and the
    box corner in the gradient's sign direction. ``region="ball"``: ``‖y‖₂ ≤ ε (‖θ‖₂ + 1)``,
    by projected normalized-gradient ascent with a halving step. Both return the best value found:
    a lower bound on φ, with the maximizer in ``extra["maximizer"]`` (numpy).
    """
    if not eps > 0:
        raise ValueError(f"eps must be > 0, got {eps}")
    theta = (obj.theta if theta is None else theta).detach()
    base = float(obj.loss(theta).detach())
    count = 0

    def neg_loss_and_grad(y: np.ndarray) -> tuple[float, np.ndarray]:
        nonlocal count
        count += 1
        value, g = obj.loss_and_grad(theta + obj.vector(y))  # scipy works on CPU numpy: the API edge
        return -value, -g.cpu().numpy().astype(np.float64)

    with Stopwatch() as sw:
        g0 = obj.grad(theta).cpu().numpy()
        if region == "keskar-box":
            half = eps * (np.abs(theta.cpu().numpy()) + 1.0)
            bounds = list(zip(-half, half, strict=True))
            best_val, best_y = -np.inf, np.zeros_like(half)
            for y0 in (np.zeros_like(half), half * np.sign(g0)):
                res = minimize(
                    neg_loss_and_grad,
                    y0,
                    jac=True,
                    method="L-BFGS-B",
                    bounds=bounds,
                    options={"maxiter": maxiter},
                )
                if -res.fun > best_val:
                    best_val, best_y = -res.fun, res.x
        elif region == "ball":
            radius = eps * (float(theta.norm()) + 1.0)
            best_val, best_y = _projected_ascent(neg_loss_and_grad, g0, radius, maxiter)
        else:
            raise ValueError(f"region must be 'keskar-box' or 'ball', got {region!r}")
    value = 100.0 * (best_val - base) / (1.0 + base)
    return Estimate(
        value,
        0.0,
        "lower_bound",
        hvps=count,
        seconds=sw.seconds,
        extra={"maximizer": best_y, "max_loss": best_val, "loss": base, "region": region},
        precision=precision_of(obj.dtype),
    )


def _projected_ascent(neg_loss_and_grad, g0: np.ndarray, radius: float, steps: int):
    """Normalized-gradient ascent on the ℓ2 ball of ``radius``; the step halves when it fails."""
    norm0 = np.linalg.norm(g0)
    y = radius * g0 / norm0 if norm0 > 0 else np.zeros_like(g0)
    val, grad = neg_loss_and_grad(y)
    best_val, best_y, step = -val, y.copy(), radius / 2
    for _ in range(steps):
        gn = np.linalg.norm(grad)
        if gn == 0 or step < 1e-12 * radius:
            break
        cand = y - step * grad / gn  # grad is of −L
        cn = np.linalg.norm(cand)
        cand = cand * (radius / cn) if cn > radius else cand
        cval, cgrad = neg_loss_and_grad(cand)
        if -cval > best_val:
            best_val, best_y, y, grad = -cval, cand.copy(), cand, cgrad
        else:
            step /= 2
    return best_val, best_y


def adaptive_scale(obj: Objective, theta: torch.Tensor, scale: str, eta: float = 0.01) -> torch.Tensor:
    """The elementwise scale c of adaptive sharpness.

    ``"abs"``: ``c = |θ|`` on every parameter (exactly invariant under function-preserving
    diagonal rescalings). ``"abs+eta"``: ASAM's reference code, ``|w| + η`` on weights and 1 on
    biases (not exactly invariant when biases are rescaled). ``"ones"``: c = 1 (plain sharpness).
    """
    if scale == "abs":
        return theta.abs()
    if scale == "ones":
        return torch.ones_like(theta)
    if scale == "abs+eta":
        c = torch.ones_like(theta)
        for name in obj.parameter_groups()["weights"]:
            sl = obj.param_slice(name)
            c[sl] = theta[sl].abs() + eta
        return c
    raise ValueError(f"scale must be 'abs', 'abs+eta' or 'ones', got {scale!r}")


def adaptive_sharpness(
    obj: Objective,
    rho: float,
    *,
    norm: str = "linf",
    kind: str = "worst",
    scale: str = "abs",
    eta: float = 0.01,
    batch_size: int | None = None,
    steps: int = 20,
    samples: int = 100,
    seed: int = 0,
    theta: torch.Tensor | None = None,
) -> Estimate:
    """Adaptive sharpness (Kwon et al. 2021; Andriushchenko et al. 2023).

    worst: ``max_{‖u‖_p ≤ ρ} L(θ + c ⊙ u) − L(θ)``, by ``steps`` of sign-gradient (ℓ∞) or
    normalized-gradient (ℓ2) ascent in u from the first-order corner, with a step of ρ/4 halved
    whenever it fails to improve: a lower bound (``error_kind="lower_bound"``).

    average: ``E_{u ~ N(0, ρ² I)} L(θ + c ⊙ u) − L(θ)`` by ``samples`` Monte Carlo draws, with its
    standard error.

    Because the search runs in u and ``c`` scales like θ, any function-preserving diagonal
    rescaling θ → Dθ (D > 0) maps the whole computation onto itself when ``scale="abs"``.

    With ``batch_size`` the measure is the mean over consecutive batches of that size, each batch
    its own objective (Andriushchenko et al. use m = 128).
    """
    if not rho > 0:
        raise ValueError(f"rho must be > 0, got {rho}")
    if norm not in ("linf", "l2"):
        raise ValueError(f"norm must be 'linf' or 'l2', got {norm!r}")
    if kind not in ("worst", "average"):
        raise ValueError(f"kind must be 'worst' or 'average', got {kind!r}")
    theta = (obj.theta if theta is None else theta).detach()
    if batch_size is not None:
        parts = [
            adaptive_sharpness(
                obj.subset(idx),
                rho,
                norm=norm,
                kind=kind,
                scale=scale,
                eta=eta,
                steps=steps,
                samples=samples,
                seed=seed + b,
                theta=theta,
            )
            for b, idx in enumerate(torch.arange(obj.n).split(batch_size))
        ]
        values = np.array([p.value for p in parts])
        err = float(np.sqrt(np.mean(np.square([p.error for p in parts]))) / np.sqrt(len(parts)))
        return Estimate(
            float(values.mean()),
            err,
            parts[0].error_kind,
            hvps=sum(p.hvps for p in parts),
            seconds=sum(p.seconds for p in parts),
            extra={"per_batch": values.tolist()},
            precision=precision_of(obj.dtype),
        )
    c = adaptive_scale(obj, theta, scale, eta)
    with torch.no_grad():
        base = float(obj.loss(theta))
    with Stopwatch() as sw:
        if kind == "average":
            gen = torch.Generator().manual_seed(seed)
            u = obj.vector(torch.randn(samples, obj.num_params, generator=gen, dtype=obj.dtype)) * rho
            with torch.no_grad():
                losses = torch.stack([obj.loss(theta + c * ui) for ui in u]).cpu().numpy()
        else:
            best, best_u, evals = _adaptive_ascent(obj, theta, c, rho, norm, steps)
    if kind == "average":
        mean, se, ci = mean_with_stderr(losses - base)
        return Estimate(
            mean, se, "stderr", hvps=samples, seconds=sw.seconds, interval=ci, precision=precision_of(obj.dtype)
        )
    return Estimate(
        best - base,
        0.0,
        "lower_bound",
        hvps=evals,
        seconds=sw.seconds,
        extra={"maximizer": (c * best_u).cpu().numpy(), "loss": base},
        precision=precision_of(obj.dtype),
    )


def _project(u: torch.Tensor, rho: float, norm: str) -> torch.Tensor:
    if norm == "linf":
        return u.clamp(-rho, rho)
    n = u.norm()
    return u * (rho / n) if n > rho else u


def _direction(g: torch.Tensor, norm: str) -> torch.Tensor:
    if norm == "linf":
        return g.sign()
    n = g.norm()
    return g / n if n > 0 else g


def _adaptive_ascent(obj, theta, c, rho, norm, steps):
    value, g = obj.loss_and_grad(theta)
    u = _project(rho * _direction(c * g, norm), rho, norm)
    best_val, g = obj.loss_and_grad(theta + c * u)
    best_u, step, evals = u, rho / 4, 2
    for _ in range(steps):
        cand = _project(best_u + step * _direction(c * g, norm), rho, norm)
        val, cand_g = obj.loss_and_grad(theta + c * cand)
        evals += 1
        if val > best_val:
            best_val, best_u, g = val, cand, cand_g
        else:
            step /= 2
    return best_val, best_u, evals


def spherical_sharpness(
    obj: Objective,
    *,
    params: list[str] | None = None,
    theta: torch.Tensor | None = None,
    rtol: float = 1e-10,
    seed: int = 0,
) -> Estimate:
    """Spherical sharpness λ1(∇²_w L(w/‖w‖)) for the scale-invariant parameters w (Lyu et al. 2022).

    ``params`` names the parameters that form w (default: all); they are jointly normalized to
    unit norm, and λ1 is taken over the Hessian block of those coordinates. For a loss with
    ``L(cw) = L(w)`` this depends on the direction of w only.
    """
    theta = (obj.theta if theta is None else theta).detach().clone()
    names = list(obj.layout.names) if params is None else params
    idx = torch.cat([torch.arange(obj.num_params, device=obj.device)[obj.param_slice(n)] for n in names])
    w_norm = theta[idx].norm()
    if w_norm == 0:
        raise ValueError("spherical sharpness is undefined at w = 0")
    theta[idx] = theta[idx] / w_norm
    spec = hessian_spectrum(obj, 1, theta=theta, rtol=rtol, seed=seed, coords=idx)
    return extreme_estimate(spec, {"w_norm": float(w_norm)})
