"""Rates: the exponent of a power law y ∝ x^s fitted on log-log axes, with a bootstrap over repeated draws."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

__all__ = ["log_log_slope", "log_log_slope_bootstrap"]


def log_log_slope(x: Sequence[float], y: Sequence[float]) -> float:
    """The least-squares slope s of log y = s log x + b."""
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def log_log_slope_bootstrap(
    x: Sequence[float],
    samples: np.ndarray,
    rng: np.random.Generator,
    resamples: int,
    *,
    average: Literal["geometric", "arithmetic"] = "geometric",
) -> tuple[float, float, float]:
    """The slope against log x of the log of the per-x average of ``samples`` (len(x) × draws), and
    its 95% percentile interval over ``resamples`` resamplings of the draws, each x resampled on its
    own. ``average``: the geometric mean (the mean of the logs, the stable summary of heavy-tailed
    samples) or the arithmetic mean."""
    log_x = np.log(x)
    geometric = average == "geometric"
    values = np.log(samples) if geometric else samples  # what is resampled: the logs, or the samples

    def summary(s: np.ndarray) -> np.ndarray:
        return s.mean(axis=1) if geometric else np.log(s.mean(axis=1))

    slope = float(np.polyfit(log_x, summary(values), 1)[0])
    boots = []
    for _ in range(resamples):
        idx = rng.integers(0, samples.shape[1], size=samples.shape)
        boots.append(np.polyfit(log_x, summary(np.take_along_axis(values, idx, axis=1)), 1)[0])
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return slope, float(lo), float(hi)
