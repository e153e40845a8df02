"""How the measures scored on a population compare: the best of a group, τ under rescaling, a leaderboard.

Everything here reads the :class:`evaluators.scores.Scores` of each measure (Kendall τ with the gap
and its bootstrap CI, granulated Ψ (Jiang et al. 2020, §6), conditional MI) and the included models'
rows, and returns plain dicts, one per measure or per (measure, population, rescaling).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from evaluators.scores import Scores, rescaled_tau

__all__ = [
    "against_baselines",
    "leaderboard",
    "psi",
    "psi_spread",
    "rescaling_effects",
    "largest_tau_changes",
    "weak_correlation",
]


def psi(s: Scores) -> float:
    """The granulated Ψ of one measure's scores."""
    return s.psi.psi


def against_baselines(
    population: str, scores: Mapping[str, Scores], group: Sequence[str], baselines: Sequence[str], margin: float
) -> dict:
    """The group's best measure by Ψ against the best baseline, ``psi_to_match`` = baseline Ψ − margin,
    and the group's measures whose τ interval lies above 0 (measures with a non-finite Ψ left out)."""
    best_of = {m: scores[m] for m in group if math.isfinite(psi(scores[m]))}
    base = {m: scores[m] for m in baselines if math.isfinite(psi(scores[m]))}
    if not best_of or not base:
        raise ValueError(f"population {population!r}: no sharpness measure or no baseline could be scored")
    best = max(best_of, key=lambda m: psi(best_of[m]))
    best_base = max(base, key=lambda m: psi(base[m]))
    positive = [m for m, s in best_of.items() if s.tau[1] > 0]
    return {
        "best_sharpness_measure": best,
        "best_sharpness_psi": psi(best_of[best]),
        "best_baseline": best_base,
        "best_baseline_psi": psi(base[best_base]),
        "best_baseline_psi_ci": list(base[best_base].psi.interval),
        "psi_to_match": psi(base[best_base]) - margin,
        "sharpness_measures_with_tau_ci_above_0": len(positive),
        "tau_ci_above_0": positive,
    }


def weak_correlation(s: Scores) -> dict:
    """τ with its CI, |τ|, and the smallest |τ| inside the CI (0 when the CI straddles 0)."""
    tau, lo, hi = s.tau
    return {"tau": tau, "tau_ci": [lo, hi], "abs_tau": abs(tau), "ci_min_abs_tau": max(lo, -hi, 0.0)}


def psi_spread(scores: Mapping[str, Scores], measures: Sequence[str]) -> dict[str, float]:
    """max − min of the per-hyperparameter ψ_i of each measure that has any."""
    return {
        m: max(scores[m].psi.per_hyperparameter.values()) - min(scores[m].psi.per_hyperparameter.values())
        for m in measures
        if scores[m].psi.per_hyperparameter
    }


def rescaling_effects(
    kept: Mapping[str, Sequence[dict]],
    measures: Sequence[str],
    rescalings: Sequence[str],
    theory: Callable[[str, str], bool | None],
) -> list[dict]:
    """τ with the gap before and after each rescaling, per measure (outer) and population (inner),
    where the measure applies (some finite value); ``invariant`` is ``theory(measure, rescaling)``."""
    effects = []
    for m in measures:
        for name, rows in kept.items():
            if not any(math.isfinite(r[m]) for r in rows):
                continue  # does not apply to this population
            for kind in rescalings:
                before, after, models = rescaled_tau(rows, m, kind)
                effects.append(
                    {"measure": m, "population": name, "rescaling": kind, "before": before, "after": after,
                     "models": models, "invariant": theory(m, kind)}
                )  # fmt: skip
    return effects


def largest_tau_changes(effects: Sequence[dict], rescalings: Sequence[str]) -> dict[str, dict[str, float]]:
    """Per rescaling and measure, the largest |Δτ| over the populations; NaN (τ not computable) sticks."""
    changes: dict[str, dict[str, float]] = {kind: {} for kind in rescalings}
    for e in effects:
        change, per_measure = abs(e["after"] - e["before"]), changes[e["rescaling"]]
        per_measure[e["measure"]] = change if math.isnan(change) else max(per_measure.get(e["measure"], 0.0), change)
    return changes


def leaderboard(
    scorable: Mapping[str, Mapping[str, Scores]],
    kept: Mapping[str, Sequence[dict]],
    failures: Mapping[str, Mapping[str, int]],
    measures: Sequence[str],
) -> dict:
    """Every measure × population (in ``kept``'s order): its scores, or ``"n/a"`` (does not apply) or
    ``"not scored"``; what is missing and why; the three measures with the largest |τ| per population."""
    cells: dict[str, dict[str, Scores | str]] = {}
    missing = []
    for m in measures:
        cells[m] = {}
        for name in kept:
            s = scorable.get(name, {}).get(m)
            applies = any(math.isfinite(r[m]) for r in kept[name])
            if failures[name].get(m, 0):
                missing.append(f"{m} on {name} (failed on {failures[name][m]} models)")
            if s is None or not applies:
                cells[m][name] = "n/a" if not applies else "not scored"
                if applies:
                    missing.append(f"{m} on {name}")
                continue
            if not (math.isfinite(s.tau[0]) and math.isfinite(psi(s))):
                missing.append(f"{m} on {name}")
            cells[m][name] = s
    best = {
        name: sorted((m for m in measures if math.isfinite(scores[m].tau[0])), key=lambda m: -abs(scores[m].tau[0]))[:3]
        for name, scores in scorable.items()
    }
    return {"cells": cells, "missing": missing, "best": best}
