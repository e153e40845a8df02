"""Paired comparisons of two training arms run from the same starts.

For per-pair differences ``δ_1 … δ_m`` (e.g. ``log λ1(A) − log λ1(B)`` of two nets trained from
the same initial weights), :func:`mean_t_interval` gives the mean and its Student-t interval
``δ̄ ± t_{1−α/2, m−1} s/√m``, ``s`` the sample standard deviation: the interval a rule reads as
"wholly above a cut", "wholly below" or "within ±δ" (an equivalence test, two one-sided tests).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats

__all__ = ["mean_t_interval"]


def mean_t_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, list[float]]:
    """Mean and ``confidence`` Student-t interval of independent values; the interval is NaN below two values."""
    v = np.asarray(values, dtype=float)
    mean = float(np.mean(v))
    if len(v) < 2:
        return mean, [float("nan"), float("nan")]
    half = float(stats.t.ppf(0.5 + confidence / 2, len(v) - 1) * np.std(v, ddof=1) / np.sqrt(len(v)))
    return mean, [mean - half, mean + half]
