"""PAC-Bayes flatness 1/σ², plain and magnitude-aware (Jiang et al. 2020)."""

from __future__ import annotations

import numpy as np
import torch

from evaluators.estimate import Estimate, Stopwatch, mean_with_stderr, precision_of
from evaluators.objective import Objective

__all__ = ["pacbayes_flatness"]


def pacbayes_flatness(
    obj: Objective,
    *,
    magnitude_aware: bool = False,
    target: float = 0.1,
    metric: str = "error",
    eps: float = 1e-3,
    samples: int = 32,
    sigma_max: float = 10.0,
    iterations: int = 30,
    seed: int = 0,
    theta: torch.Tensor | None = None,
) -> Estimate:
    """PAC-Bayes flatness 1/σ² (Jiang et al. 2020, measures "pacbayes.sharpness" and "mag.flatness").

    σ is the largest noise scale whose mean increase of the training ``metric`` ("error": 0-1
    error; "loss": the objective's loss) stays ≤ ``target``, with weight noise
    ``N(0, σ²)`` (plain) or ``N(0, σ² θ_i² + ε²)`` (magnitude-aware). It is found by bisection
    on log σ in [e^{-30} σ_max, σ_max] with ``samples`` fixed noise draws (common random numbers;
    the loss deviation is then monotone in σ near a minimum, the 0-1 deviation need not be, so the
    bisection finds *a* crossing). ``interval`` brackets 1/σ² for those draws; when the target is
    not crossed inside the search range, the interval is one-sided ((0, 1/σ_max²] or
    [1/σ_min², ∞)) and ``converged`` is False. ``extra`` holds σ and the deviation at σ with its
    standard error over the draws.
    """
    if metric not in ("error", "loss"):
        raise ValueError(f"metric must be 'error' or 'loss', got {metric!r}")
    theta = (obj.theta if theta is None else theta).detach()
    gen = torch.Generator().manual_seed(seed)
    z = obj.vector(torch.randn(samples, obj.num_params, generator=gen, dtype=obj.dtype))  # CPU draws, any device
    magnitude = theta.abs()

    def measure(t: torch.Tensor) -> float:
        with torch.no_grad():
            if metric == "loss":
                return float(obj.loss(t))
            return obj.error(t)

    base = measure(theta)

    def deviations(sigma: float) -> np.ndarray:
        if magnitude_aware:
            std = torch.sqrt(sigma**2 * magnitude**2 + eps**2)
        else:
            std = torch.full_like(theta, sigma)
        return np.array([measure(theta + std * zi) for zi in z]) - base

    sigma_min = sigma_max * np.exp(-30.0)
    with Stopwatch() as sw:
        converged = True
        if deviations(sigma_max).mean() <= target:  # not crossed: only 1/σ² ≤ 1/σ_max² is known
            lo = hi = sigma_max
            bracket, converged = (0.0, 1.0 / sigma_max**2), False
        elif deviations(sigma_min).mean() > target:  # crossed below the range: 1/σ² ≥ 1/σ_min²
            lo = hi = sigma_min
            bracket, converged = (1.0 / sigma_min**2, float("inf")), False
        else:
            lo_log, hi_log = np.log(sigma_min), np.log(sigma_max)
            for _ in range(iterations):
                mid = (lo_log + hi_log) / 2
                if deviations(float(np.exp(mid))).mean() <= target:
                    lo_log = mid
                else:
                    hi_log = mid
            lo, hi = float(np.exp(lo_log)), float(np.exp(hi_log))
            bracket = (1.0 / hi**2, 1.0 / lo**2)
        dev_mean, dev_se, _ = mean_with_stderr(deviations(lo))
    value = 1.0 / lo**2
    return Estimate(
        value,
        (bracket[1] - bracket[0]) / 2,
        "bracket",
        hvps=samples * (iterations + 3),
        seconds=sw.seconds,
        converged=converged,
        interval=bracket,
        extra={"sigma": lo, "deviation": dev_mean, "deviation_stderr": dev_se, "metric": metric},
        precision=precision_of(obj.dtype),
    )
