"""Small helpers that turn measured errors into verdicts without letting a NaN pass."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

__all__ = ["worst", "tolerance_verdict", "combine"]


def worst(values: Iterable[float]) -> float:
    """The largest value, NaN if any value is NaN (``max`` would silently drop it).

    Raises:
        ValueError: nothing was measured (an empty check must not pass).
    """
    arr = np.asarray(list(values), dtype=float)
    if arr.size == 0:
        raise ValueError("nothing was checked: the parameter set selects no case")
    return float(np.max(arr))


def tolerance_verdict(error: float, holds_at_most: float, refuted_above: float) -> str:
    """``holds`` if error ≤ holds_at_most, ``refuted`` if error > max(refuted_above, holds_at_most),
    ``inconclusive`` in between or when the error is not a finite number."""
    if not math.isfinite(error):
        return "inconclusive"
    if error <= holds_at_most:
        return "holds"
    return "refuted" if error > max(refuted_above, holds_at_most) else "inconclusive"


def combine(verdicts: Iterable[str]) -> str:
    """refuted if any part is refuted, holds if every part holds (and there is one), else inconclusive."""
    verdicts = list(verdicts)
    if not verdicts:
        raise ValueError("nothing was checked: the parameter set selects no case")
    if "refuted" in verdicts:
        return "refuted"
    return "holds" if all(v == "holds" for v in verdicts) else "inconclusive"
