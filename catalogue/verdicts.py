"""Small helpers that turn measured errors into verdicts without letting a NaN pass."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

__all__ = ["worst", "across_seeds", "SEED_QUORUM"]

SEED_QUORUM = 0.8


def worst(values: Iterable[float]) -> float:
    """The largest value, NaN if any value is NaN (``max`` would silently drop it).

    Raises:
        ValueError: nothing was measured (an empty check must not pass).
    """
    arr = np.asarray(list(values), dtype=float)
    if arr.size == 0:
        raise ValueError("nothing was checked: the parameter set selects no case")
    return float(np.max(arr))


def across_seeds(verdicts: Iterable[str]) -> str:
    """The verdict of independent seeds: ``holds`` (``refuted``) when at least 80% of the seeds hold
    (refute) and none says the opposite, else ``inconclusive`` (seed-dependent).

    Why 80%: with five seeds, one seed may come out inconclusive (a run that did not converge, a CI
    that straddles its cut) without erasing the others, but a seed that contradicts the rest always
    makes the verdict seed-dependent.
    """
    verdicts = list(verdicts)
    if not verdicts:
        raise ValueError("no seed was run")
    quorum = math.ceil(SEED_QUORUM * len(verdicts) - 1e-9)
    for verdict, opposite in (("holds", "refuted"), ("refuted", "holds")):
        if verdicts.count(verdict) >= quorum and opposite not in verdicts:
            return verdict
    return "inconclusive"
