"""The result type every evaluator returns: a value with an honest error."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from scipy import stats

ErrorKind = Literal["residual_bound", "stderr", "lower_bound", "bracket", "exact", "none"]

__all__ = ["Estimate", "ErrorKind", "Stopwatch", "mean_with_stderr", "precision_of"]


@dataclass(frozen=True)
class Estimate:
    """A measured quantity with its error.

    Attributes:
        value: the estimate.
        error: its error, of the kind named by ``error_kind``:
            ``residual_bound`` — ``‖Hv − λv‖``: some eigenvalue lies within it of ``value``;
            ``stderr`` — the standard error of a Monte Carlo mean (``interval`` holds a 95% CI);
            ``lower_bound`` — ``value`` is a certified lower bound found by maximization;
            ``error`` is 0 (the gap to the true maximum is unknown);
            ``bracket`` — ``interval`` brackets the value (e.g. a bisection); ``error`` is its
            half-width;
            ``exact`` — computed in closed form up to round-off; ``error`` is 0 in float64 and,
            where an evaluator measures it, the round-off against float64 in lower precision;
            ``none`` — no error available (e.g. a baseline kept for comparison).
        error_kind: see ``error``.
        hvps: Hessian-vector products (or, for sharpness, loss/gradient evaluations) used.
        seconds: wall time.
        converged: whether the method met its tolerance.
        interval: an optional (low, high) confidence interval.
        extra: method-specific details (e.g. the maximizer, λ_min, iteration counts).
        precision: the floating point type it was computed in (``"float64"`` unless the
            objective was built with another ``dtype``; then the error is widened for it).
    """

    value: float
    error: float
    error_kind: ErrorKind
    hvps: int = 0
    seconds: float = 0.0
    converged: bool = True
    interval: tuple[float, float] | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    precision: str = "float64"

    def summary(self) -> dict[str, Any]:
        """Plain JSON-able numbers for records."""
        out = {
            "value": float(self.value),
            "error": float(self.error),
            "error_kind": self.error_kind,
            "hvps": int(self.hvps),
            "seconds": float(self.seconds),
            "converged": bool(self.converged),
        }
        if self.interval is not None:
            out["interval"] = [float(self.interval[0]), float(self.interval[1])]
        if self.precision != "float64":
            out["precision"] = self.precision
        return out


class Stopwatch:
    """Wall-clock timer: ``with Stopwatch() as sw: ...; sw.seconds``."""

    def __enter__(self) -> Stopwatch:
        self._start = time.perf_counter()
        self.seconds = 0.0
        return self

    def __exit__(self, *exc) -> None:
        self.seconds = time.perf_counter() - self._start


def mean_with_stderr(samples: np.ndarray, confidence: float = 0.95) -> tuple[float, float, tuple[float, float]]:
    """Sample mean, its standard error ``s/√m`` and a Student-t confidence interval."""
    samples = np.asarray(samples, dtype=np.float64)
    m = samples.size
    mean = float(samples.mean())
    if m < 2:
        return mean, float("inf"), (-float("inf"), float("inf"))
    se = float(samples.std(ddof=1) / np.sqrt(m))
    q = float(stats.t.ppf(0.5 + confidence / 2, m - 1))
    return mean, se, (mean - q * se, mean + q * se)


def precision_of(dtype) -> str:
    """``torch.float32`` → ``"float32"``: the name an :class:`Estimate` records its precision by."""
    return str(dtype).removeprefix("torch.")
