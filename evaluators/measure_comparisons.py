"""How the measures scored on a population compare: the best of a group, τ under rescaling, a leaderboard.

Everything here reads the :class:`evaluators.scores.Scores` of each measure (Kendall τ with the gap
and its bootstrap CI, granulated Ψ (Jiang et al. 2020, §6), conditional MI), or its
:class:`evaluators.scores.FixedDataScores` (the same on fixed data), and the included models' rows,
and returns plain dicts, one per measure or per (measure, population, rescaling).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from evaluators.scores import FixedDataScores, Scores, paired_psi_difference, rescaled_tau

__all__ = [
    "against_baselines",
    "leaderboard",
    "psi",
    "psi_spread",
    "paired_psi_deficit",
    "rescaling_effects",
    "largest_tau_changes",
    "weak_correlation",
]


def psi(s: Scores | FixedDataScores) -> float:
    """The granulated Ψ of one measure's scores."""
    return s.psi.psi


def against_baselines(
    population: str,
    scores: Mapping[str, Scores | FixedDataScores],
    group: Sequence[str],
    baselines: Sequence[str],
) -> dict:
    """The group's best measure by Ψ and the best baseline, the measures of each with a finite Ψ
    (the others do not apply), and the group's measures whose τ interval lies above 0."""
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
        "scored_measures": list(best_of),
        "scored_baselines": list(base),
        "sharpness_measures_with_tau_ci_above_0": len(positive),
        "tau_ci_above_0": positive,
    }


def weak_correlation(s: Scores | FixedDataScores) -> dict:
    """τ with its CI, |τ|, and the smallest |τ| inside the CI (0 when the CI straddles 0)."""
    tau, lo, hi = s.tau
    return {"tau": tau, "tau_ci": [lo, hi], "abs_tau": abs(tau), "ci_min_abs_tau": max(lo, -hi, 0.0)}


def psi_spread(
    scores: Mapping[str, Scores | FixedDataScores], measures: Sequence[str], exclude: Sequence[str] = ()
) -> dict[str, float]:
    """max − min of the per-hyperparameter ψ_i (those not in ``exclude``) of each measure that has any."""
    spread = {}
    for m in measures:
        values = [v for h, v in scores[m].psi.per_hyperparameter.items() if h not in exclude]
        if values:
            spread[m] = max(values) - min(values)
    return spread


def paired_psi_deficit(
    kept: Sequence[dict],
    hyperparameters: Sequence[str],
    data_axes: Sequence[str],
    measures: Sequence[str],
    baselines: Sequence[str],
    rng: np.random.Generator,
    resamples: int,
) -> dict:
    """``max_b Ψ(baseline b) − max_m Ψ(measure m)`` on fixed data (Ψ over the hyperparameters that are
    not data axes), with its paired bootstrap CI (:func:`evaluators.scores.paired_psi_difference`:
    the best of each group is chosen again in every resample)."""

    def column(name: str) -> list:
        return [r[name] for r in kept]

    training = [h for h in hyperparameters if h not in data_axes]
    deficit, lo, hi = paired_psi_difference(
        [column(m) for m in baselines],
        [column(m) for m in measures],
        column("gap"),
        {h: column(h) for h in hyperparameters},
        rng,
        axes=training,
        resamples=resamples,
    )
    return {"psi_deficit": deficit, "psi_deficit_ci": [lo, hi]}


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
    scorable: Mapping[str, Mapping[str, Scores | FixedDataScores]],
    kept: Mapping[str, Sequence[dict]],
    failures: Mapping[str, Mapping[str, int]],
    measures: Sequence[str],
) -> dict:
    """Every measure × population (in ``kept``'s order): its scores, or ``"n/a"`` (does not apply) or
    ``"not scored"``; what is missing and why; the three measures with the largest |τ| per population."""
    cells: dict[str, dict[str, Scores | FixedDataScores | str]] = {}
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
