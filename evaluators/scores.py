"""How well a measure ranks a population of models by generalization (Jiang et al. 2020, §4–6).

* :func:`kendall_tau`: τ_b between a measure and the generalization gap (scipy's default variant),
  with :func:`bootstrap_kendall` for a percentile CI over models resampled with replacement, and
  :func:`paired_kendall_difference` for ``|τ_b(x, y1)| − |τ_b(x, y2)|`` on the same resamples.
* :func:`granulated_kendall`: Ψ = (1/|Θ|) Σ_i ψ_i, where ψ_i is the mean, over the groups of models
  that differ only in hyperparameter i, of τ_a within the group (Jiang et al. 2020, Eq. 4–5):
  ``τ_a = (1 / (m(m−1))) Σ_{j≠k} sign(μ_j − μ_k) sign(g_j − g_k)``.
* :func:`conditional_mutual_information`: Jiang et al. 2020 §6 and the PGDL competition's scoring
  program. Over ordered pairs of models (j, k), ``V_g = sign(g_j − g_k)`` (pairs with equal gaps
  are dropped), ``V_μ = sign(μ_j − μ_k)`` ∈ {−1, 0, 1}, and ``U_S = (θ_S^j, θ_S^k)`` for a set S of
  hyperparameters; the score is ``min_S I(V_μ; V_g | U_S) / H(V_g | U_S)`` over |S| ≤ 2,
  including S = ∅ (plain normalized mutual information). Conditional quantities are weighted by
  the frequency of each cell u of U_S, so incomplete grids are handled honestly; the PGDL
  program averages cells uniformly and its S = ∅ path does not run (it names undefined
  variables), which is why that case is tested here.

* On fixed data (Jiang et al. vary optimization and architecture, not the data):
  :func:`stratified_kendall` averages τ_b over the cells of a population's data axes (training-set
  size, label noise), :func:`granulated_kendall`'s ``axes`` averages Ψ over the other
  hyperparameters only, :func:`paired_psi_difference` bootstraps the difference of the best Ψ of
  two groups of measures on the same group resamples, and :func:`score_fixed_data` puts them
  together with the CMI over pairs of models trained on the same data.

Every function ignores models whose measure or gap is NaN (a measure that does not apply).

Written out rather than taken from a library, for measured reasons (``python -m
benchmarks.scoring_libraries``; scipy 1.17.1, scikit-learn 1.9.1, 2026-12-07): the bootstraps,
because ``scipy.stats.bootstrap`` returns a NaN interval as soon as one resample's τ is undefined (a
resample constant on one side), which happened for 86 of 100 samples of 8 models with tied gaps,
where these drop such resamples (0 of 100 without an interval), at 1/18 of the time; the mutual
information, because ``sklearn.metrics.mutual_info_score`` on the same contingency tables agrees
only to ~1e-15 bits (bit-equal on 27 of 2000 random 2 × 3 tables), which would move the last bits
of every committed CMI, at 11 × the time per table.

On a population's tidy rows (one dict per model, a column per measure, ``gap``, ``converged``):
:func:`score_population` (τ with the gap and with the test metric, Ψ, CMI over the models that met
their stopping criterion), :func:`rescaled_tau` and :func:`measure_failures`.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "kendall_tau",
    "kendall_tau_a",
    "bootstrap_kendall",
    "paired_kendall_difference",
    "Granulated",
    "granulated_kendall",
    "paired_psi_difference",
    "stratified_kendall",
    "grid_completeness",
    "ConditionalMI",
    "conditional_mutual_information",
    "included",
    "Scores",
    "score_population",
    "FixedDataScores",
    "score_fixed_data",
    "rescaled_tau",
    "measure_failures",
]


def _finite_pair(x: Sequence[float], y: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"need two 1-d arrays of one length, got shapes {x.shape} and {y.shape}")
    keep = np.isfinite(x) & np.isfinite(y)
    return x[keep], y[keep]


def _signs(v: np.ndarray) -> np.ndarray:
    return np.sign(v[:, None] - v[None, :])


def _tau_b_from_signs(sx: np.ndarray, sy: np.ndarray) -> float:
    denom = np.sqrt((sx**2).sum() * (sy**2).sum())
    return float((sx * sy).sum() / denom) if denom > 0 else float("nan")


def kendall_tau(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall τ_b = (C − D) / √((n0 − n_x)(n0 − n_y)) (ties in x or y leave the pair out of its
    side of the normalization); NaN when fewer than two models or one side is constant."""
    x, y = _finite_pair(x, y)
    if len(x) < 2:
        return float("nan")
    return _tau_b_from_signs(_signs(x), _signs(y))


def kendall_tau_a(x: Sequence[float], y: Sequence[float]) -> float:
    """τ_a = (C − D) / (n(n−1)/2): tied pairs count zero (Jiang et al. 2020, Eq. 4); NaN if n < 2."""
    x, y = _finite_pair(x, y)
    n = len(x)
    if n < 2:
        return float("nan")
    return float((_signs(x) * _signs(y)).sum() / (n * (n - 1)))


def bootstrap_kendall(
    x: Sequence[float],
    y: Sequence[float],
    rng: np.random.Generator,
    *,
    resamples: int = 1000,
    confidence: float = 0.95,
) -> tuple[float, float, float]:
    """(τ_b, low, high): the percentile bootstrap CI over models drawn with replacement.

    A model drawn twice forms a tied pair, which τ_b leaves out, as it should. A resample with an
    undefined τ is dropped (``scipy.stats.bootstrap`` would return a NaN interval: module docstring).
    """
    x, y = _finite_pair(x, y)
    tau = kendall_tau(x, y)
    if len(x) < 3 or not np.isfinite(tau):
        return tau, float("nan"), float("nan")
    sx, sy = _signs(x), _signs(y)
    draws = rng.integers(0, len(x), size=(resamples, len(x)))
    taus = np.array([_tau_b_from_signs(sx[np.ix_(i, i)], sy[np.ix_(i, i)]) for i in draws])
    taus = taus[np.isfinite(taus)]
    if not len(taus):  # every resample constant on one side (tiny samples)
        return tau, float("nan"), float("nan")
    alpha = (1 - confidence) / 2
    return tau, float(np.quantile(taus, alpha)), float(np.quantile(taus, 1 - alpha))


def paired_kendall_difference(
    x: Sequence[float],
    y1: Sequence[float],
    y2: Sequence[float],
    rng: np.random.Generator,
    *,
    resamples: int = 1000,
    confidence: float = 0.95,
) -> tuple[float, float, float]:
    """(``|τ_b(x, y1)| − |τ_b(x, y2)|``, low, high): which of two quantities ``x`` ranks more
    strongly, with a paired percentile bootstrap over models (both τ on the same resample).

    Written out rather than ``scipy.stats.bootstrap(paired=True)``: a resample in which ``y1`` is
    constant (a hyperparameter with two or three values drawn from few models) has no τ, and scipy
    then returns a NaN interval; here such resamples are dropped, as in :func:`bootstrap_kendall`.
    """
    x, y1, y2 = (np.asarray(v, dtype=float) for v in (x, y1, y2))
    if not (x.shape == y1.shape == y2.shape) or x.ndim != 1:
        raise ValueError(f"need three 1-d arrays of one length, got shapes {x.shape}, {y1.shape}, {y2.shape}")
    sx, s1, s2 = _signs(x), _signs(y1), _signs(y2)
    diff = abs(kendall_tau(x, y1)) - abs(kendall_tau(x, y2))
    draws = rng.integers(0, len(x), size=(resamples, len(x)))
    diffs = np.array(
        [
            abs(_tau_b_from_signs(sx[np.ix_(i, i)], s1[np.ix_(i, i)]))
            - abs(_tau_b_from_signs(sx[np.ix_(i, i)], s2[np.ix_(i, i)]))
            for i in draws
        ]
    )
    diffs = diffs[np.isfinite(diffs)]
    if not len(diffs):
        return diff, float("nan"), float("nan")
    alpha = (1 - confidence) / 2
    return diff, float(np.quantile(diffs, alpha)), float(np.quantile(diffs, 1 - alpha))


def _group_ids(hparams: Mapping[str, Sequence], keep: np.ndarray, varying: str) -> dict[tuple, list[int]]:
    """Models (indices into the kept ones) grouped by the values of every hyperparameter but ``varying``."""
    others = [name for name in hparams if name != varying]
    groups: dict[tuple, list[int]] = defaultdict(list)
    for pos, i in enumerate(np.flatnonzero(keep)):
        groups[tuple(hparams[name][i] for name in others)].append(pos)
    return groups


def _check_hparams(hparams: Mapping[str, Sequence], models: int) -> None:
    if not hparams:
        raise ValueError("granulated_kendall needs at least one hyperparameter")
    for name, values in hparams.items():
        if len(values) != models:
            raise ValueError(f"hyperparameter {name!r} has {len(values)} values for {models} models")


def _check_axes(axes: Sequence[str] | None, hparams: Mapping[str, Sequence]) -> None:
    unknown = [] if axes is None else [a for a in axes if a not in hparams]
    if unknown:
        raise ValueError(f"axes: unknown hyperparameter {unknown[0]!r}; the hyperparameters are {', '.join(hparams)}")


def _group_taus(
    mu: np.ndarray, g: np.ndarray, hparams: Mapping[str, Sequence], keep: np.ndarray
) -> dict[str, np.ndarray]:
    """Per hyperparameter i, τ_a of each group of ≥ 2 kept models that differ only in i (none: left out)."""
    mu_k, g_k = mu[keep], g[keep]
    per: dict[str, np.ndarray] = {}
    for name in hparams:
        taus = [kendall_tau_a(mu_k[idx], g_k[idx]) for idx in _group_ids(hparams, keep, name).values() if len(idx) >= 2]
        if taus:
            per[name] = np.array(taus)
    return per


@dataclass(frozen=True)
class Granulated:
    """Ψ, its per-hyperparameter ψ_i, how many groups each averages, and a bootstrap CI of Ψ."""

    psi: float
    per_hyperparameter: dict[str, float]
    groups: dict[str, int]
    interval: tuple[float, float] = (float("nan"), float("nan"))
    per_hyperparameter_interval: dict[str, tuple[float, float]] = field(default_factory=dict)


def granulated_kendall(
    measure: Sequence[float],
    gap: Sequence[float],
    hparams: Mapping[str, Sequence],
    rng: np.random.Generator | None = None,
    *,
    axes: Sequence[str] | None = None,
    resamples: int = 1000,
    confidence: float = 0.95,
) -> Granulated:
    """Jiang et al. 2020's granulated Kendall coefficient Ψ.

    ``hparams`` maps each hyperparameter that varies over the population to its value per model.
    ψ_i averages τ_a over the groups of ≥ 2 models sharing every other hyperparameter's value; a
    hyperparameter without such a group is left out of Ψ. ``axes`` (default: all) are the ψ_i that
    Ψ and its CI average; the others are still held fixed in every group and reported in
    ``per_hyperparameter`` (the data axes of a population: Ψ on fixed data). With ``rng``, the CI
    resamples each hyperparameter's groups with replacement (groups, not models, are the units of
    ψ_i).

    Written out rather than ``scipy.stats.bootstrap``: the statistic resamples groups per
    hyperparameter, not observations of one sample, which scipy's API does not express.
    """
    mu, g = np.asarray(measure, dtype=float), np.asarray(gap, dtype=float)
    _check_hparams(hparams, len(mu))
    _check_axes(axes, hparams)
    keep = np.isfinite(mu) & np.isfinite(g)
    per = _group_taus(mu, g, hparams, keep)
    averaged = [name for name in per if axes is None or name in axes]
    if not averaged:
        return Granulated(
            float("nan"), {name: float(t.mean()) for name, t in per.items()}, {name: len(t) for name, t in per.items()}
        )
    psi = float(np.mean([per[name].mean() for name in averaged]))
    interval = per_interval = None
    if rng is not None:
        alpha = (1 - confidence) / 2
        boot = {name: t[rng.integers(0, len(t), size=(resamples, len(t)))].mean(axis=1) for name, t in per.items()}
        total = np.mean(np.stack([boot[name] for name in averaged]), axis=0)
        interval = (float(np.quantile(total, alpha)), float(np.quantile(total, 1 - alpha)))
        per_interval = {
            name: (float(np.quantile(b, alpha)), float(np.quantile(b, 1 - alpha))) for name, b in boot.items()
        }
    return Granulated(
        psi,
        {name: float(t.mean()) for name, t in per.items()},
        {name: len(t) for name, t in per.items()},
        interval or (float("nan"), float("nan")),
        per_interval or {},
    )


def paired_psi_difference(
    first: Sequence[Sequence[float]],
    second: Sequence[Sequence[float]],
    gap: Sequence[float],
    hparams: Mapping[str, Sequence],
    rng: np.random.Generator,
    *,
    axes: Sequence[str] | None = None,
    resamples: int = 1000,
    confidence: float = 0.95,
) -> tuple[float, float, float]:
    """(``max_a Ψ(first_a) − max_b Ψ(second_b)``, low, high): the best of one group of measures
    against the best of another by granulated Ψ (``axes`` as in :func:`granulated_kendall`), with a
    paired bootstrap.

    ``first`` and ``second`` are lists of measures (one value per model each; one measure per group
    compares two measures). Every Ψ is taken over the models where every measure and the gap are
    finite, so all measures share their groups; each resample draws each hyperparameter's groups
    once, with replacement, and uses that draw for every measure, then takes both maxima again, so
    the interval accounts for which measure is best in each resample. Two Ψ intervals read side by
    side ignore that the measures are scored on the same groups; this interval does not. As in
    :func:`granulated_kendall`, the groups of different hyperparameters are resampled
    independently although they share models.
    """
    first, second = np.atleast_2d(np.asarray(first, dtype=float)), np.atleast_2d(np.asarray(second, dtype=float))
    g = np.asarray(gap, dtype=float)
    if first.shape[1] != len(g) or second.shape[1] != len(g):
        raise ValueError(f"need one value per model: {first.shape[1]}, {second.shape[1]} and {len(g)} models")
    _check_hparams(hparams, len(g))
    _check_axes(axes, hparams)
    keep = np.isfinite(first).all(axis=0) & np.isfinite(second).all(axis=0) & np.isfinite(g)
    per = [[_group_taus(m, g, hparams, keep) for m in group] for group in (first, second)]
    averaged = [name for name in per[0][0] if axes is None or name in axes]
    if not averaged:
        return float("nan"), float("nan"), float("nan")

    def best(draws: dict[str, np.ndarray | slice]) -> list[np.ndarray]:
        """Per group, the largest Ψ over its measures, under each axis's group draw."""
        return [
            np.max([np.mean([t[name][draws[name]].mean(axis=-1) for name in averaged], axis=0) for t in group], axis=0)
            for group in per
        ]

    diff = float(np.subtract(*best({name: slice(None) for name in averaged})))
    draws = {n: rng.integers(0, len(per[0][0][n]), size=(resamples, len(per[0][0][n]))) for n in averaged}
    boot = np.subtract(*best(draws))
    alpha = (1 - confidence) / 2
    return diff, float(np.quantile(boot, alpha)), float(np.quantile(boot, 1 - alpha))


def stratified_kendall(
    x: Sequence[float],
    y: Sequence[float],
    strata: Sequence,
    rng: np.random.Generator,
    *,
    resamples: int = 1000,
    confidence: float = 0.95,
) -> tuple[float, float, float]:
    """(τ̄, low, high): τ̄ = the mean over strata of τ_b within each stratum, with a percentile CI
    that resamples models with replacement within each stratum.

    The strata are the cells of a population's data axes (one training set each), so τ̄ ranks only
    models trained on the same data, and each training set counts once. A stratum with fewer than 3
    finite pairs, or whose τ_b is undefined, is left out; a resample in which a stratum that counts
    has no τ_b is dropped, so every resample averages the same strata (as :func:`bootstrap_kendall`
    drops a resample without a τ).
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    strata = np.asarray([str(s) for s in strata])
    if not (x.shape == y.shape == strata.shape):
        raise ValueError(f"need three arrays of one length, got shapes {x.shape}, {y.shape}, {strata.shape}")
    finite = np.isfinite(x) & np.isfinite(y)
    cells = []
    for c in np.unique(strata):
        sel = finite & (strata == c)
        if sel.sum() >= 3:
            sx, sy = _signs(x[sel]), _signs(y[sel])
            if np.isfinite(_tau_b_from_signs(sx, sy)):
                cells.append((sx, sy))
    if not cells:
        return float("nan"), float("nan"), float("nan")
    tau = float(np.mean([_tau_b_from_signs(sx, sy) for sx, sy in cells]))
    boot = np.empty((resamples, len(cells)))
    for c, (sx, sy) in enumerate(cells):
        for r, i in enumerate(rng.integers(0, len(sx), size=(resamples, len(sx)))):
            boot[r, c] = _tau_b_from_signs(sx[np.ix_(i, i)], sy[np.ix_(i, i)])
    means = boot[np.isfinite(boot).all(axis=1)].mean(axis=1)
    if not len(means):
        return tau, float("nan"), float("nan")
    alpha = (1 - confidence) / 2
    return tau, float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha))


def grid_completeness(hparams: Mapping[str, Sequence]) -> tuple[bool, int, int]:
    """(complete, combinations expected, combinations present): a grid is complete when every
    combination of the observed values occurs, each equally often."""
    if not hparams:
        return True, 1, 1
    columns = list(hparams.values())
    expected = int(np.prod([len(set(c)) for c in columns]))
    counts: dict[tuple, int] = defaultdict(int)
    for row in zip(*columns, strict=True):
        counts[row] += 1
    present = len(counts)
    return present == expected and len(set(counts.values())) == 1, expected, present


def _entropy(counts: np.ndarray) -> float:
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log2(p)).sum())


def _mutual_information(table: np.ndarray) -> float:
    """I(A; B) in bits from a contingency table of counts (rows A, columns B)."""
    total = table.sum()
    joint = table / total
    pa, pb = joint.sum(axis=1, keepdims=True), joint.sum(axis=0, keepdims=True)
    nz = joint > 0
    return float((joint[nz] * np.log2(joint[nz] / (pa @ pb)[nz])).sum())


@dataclass(frozen=True)
class ConditionalMI:
    """The minimum normalized CMI, the conditioning set that attains it, and the value per set."""

    value: float
    argmin: tuple[str, ...]
    per_set: dict[tuple[str, ...], float]
    complete_grid: bool


def conditional_mutual_information(
    measure: Sequence[float],
    gap: Sequence[float],
    hparams: Mapping[str, Sequence],
    *,
    max_set_size: int = 2,
    conditioning_sets: Sequence[tuple[str, ...]] | None = None,
    within: Sequence | None = None,
) -> ConditionalMI:
    """``min_S I(V_μ; V_g | U_S) / H(V_g | U_S)`` over the conditioning sets (see the module docstring).

    Args:
        measure, gap: one value per model (NaN: left out).
        hparams: each varying hyperparameter's value per model.
        max_set_size: all sets S of at most this many hyperparameters, ∅ included.
        conditioning_sets: explicit sets instead (``[()]`` is the unconditioned score).
        within: a label per model (a data cell); only pairs of models with the same label count.
    """
    mu, g = _finite_pair(measure, gap)
    keep = np.isfinite(np.asarray(measure, dtype=float)) & np.isfinite(np.asarray(gap, dtype=float))
    hp = {name: np.asarray(values, dtype=object)[keep] for name, values in hparams.items()}
    if conditioning_sets is None:
        names = list(hparams)
        conditioning_sets = [s for k in range(max_set_size + 1) for s in itertools.combinations(names, k)]
    for s in conditioning_sets:
        for name in s:
            if name not in hparams:
                raise ValueError(f"conditioning set {s}: unknown hyperparameter {name!r}")
    complete = grid_completeness(hp)[0]
    if len(mu) < 2:
        return ConditionalMI(float("nan"), (), {}, complete)
    codes = {name: np.unique(v.astype(str), return_inverse=True)[1] for name, v in hp.items()}
    j, k = np.where(~np.eye(len(mu), dtype=bool))  # ordered pairs j ≠ k
    if within is not None:
        label = np.asarray([str(v) for v in within], dtype=object)[keep]
        j, k = j[label[j] == label[k]], k[label[j] == label[k]]
    vg = np.sign(g[j] - g[k])
    vm = np.sign(mu[j] - mu[k])
    tied = vg == 0
    j, k, row, col = j[~tied], k[~tied], (vg[~tied] > 0).astype(int), (vm[~tied] + 1).astype(int)
    per_set: dict[tuple[str, ...], float] = {}
    for s in conditioning_sets:
        key = np.zeros(len(j), dtype=np.int64)
        for name in s:  # the cell of U_S = (θ_S^j, θ_S^k) as one mixed-radix integer
            levels = int(codes[name].max()) + 1
            key = (key * levels + codes[name][j]) * levels + codes[name][k]
        cell = np.unique(key, return_inverse=True)[1]
        tables = np.zeros((int(cell.max()) + 1 if len(cell) else 0, 2, 3))
        np.add.at(tables, (cell, row, col), 1.0)
        total = tables.sum()
        if total == 0:
            continue
        mi = sum(t.sum() / total * _mutual_information(t) for t in tables)
        h = sum(t.sum() / total * _entropy(t.sum(axis=1)) for t in tables)
        if h > 0:
            per_set[tuple(s)] = mi / h
    if not per_set:
        return ConditionalMI(float("nan"), (), {}, complete)
    argmin = min(per_set, key=per_set.get)
    return ConditionalMI(per_set[argmin], argmin, per_set, complete)


def included(rows: Sequence[dict]) -> list[dict]:
    """The models that met their stopping criterion."""
    return [r for r in rows if r["converged"]]


@dataclass(frozen=True)
class Scores:
    """Scores of one measure on one population (τ against the gap and the test metric, Ψ, CMI)."""

    tau: tuple[float, float, float]
    tau_test: tuple[float, float, float]
    psi: Granulated
    cmi: ConditionalMI
    models: int


def score_population(
    rows: Sequence[dict], hyperparameters: Sequence[str], column: str, rng: np.random.Generator, resamples: int
) -> Scores:
    """Scores of the measure in ``column`` over the included models (NaN values left out)."""
    rows = included(rows)
    mu = np.array([r[column] for r in rows], dtype=float)
    gap = np.array([r["gap"] for r in rows], dtype=float)
    test = np.array([r["test_error"] if math.isfinite(r["test_error"]) else r["test_loss"] for r in rows])
    hp = {h: [r[h] for r in rows] for h in hyperparameters}
    tau = bootstrap_kendall(mu, gap, rng, resamples=resamples)
    tau_test = bootstrap_kendall(mu, test, rng, resamples=resamples)
    psi = granulated_kendall(mu, gap, hp, rng, resamples=resamples) if hp else Granulated(math.nan, {}, {})
    cmi = conditional_mutual_information(mu, gap, hp)
    return Scores(tau, tau_test, psi, cmi, int(np.isfinite(mu).sum()))


@dataclass(frozen=True)
class FixedDataScores:
    """Scores of one measure comparing only models trained on the same data (Jiang et al. 2020 vary
    optimization and architecture on fixed data): τ stratified by the cells of the data axes; Ψ
    averaged over the other hyperparameters, with each data axis's own ψ kept apart in
    ``psi.per_hyperparameter``; the CMI over pairs of models trained on the same data, conditioned
    on that data (``min_{S'} I(V_μ; V_g | U_{D ∪ S'}) / H(V_g | U_{D ∪ S'})`` over sets S' of ≤ 2
    training hyperparameters, D the data axes). ``cells`` counts the data cells of the included
    models (τ̄ averages those with ≥ 3)."""

    tau: tuple[float, float, float]
    psi: Granulated
    cmi: ConditionalMI
    data_axes: tuple[str, ...]
    cells: int
    models: int


def score_fixed_data(
    rows: Sequence[dict],
    hyperparameters: Sequence[str],
    data_axes: Sequence[str],
    column: str,
    rng: np.random.Generator,
    resamples: int,
) -> FixedDataScores:
    """:class:`FixedDataScores` of the measure in ``column`` over the included models."""
    rows = included(rows)
    mu = np.array([r[column] for r in rows], dtype=float)
    gap = np.array([r["gap"] for r in rows], dtype=float)
    cells = [tuple(r[a] for a in data_axes) for r in rows]
    tau = stratified_kendall(mu, gap, cells, rng, resamples=resamples)
    hp = {h: [r[h] for r in rows] for h in hyperparameters}
    training = [h for h in hyperparameters if h not in data_axes]
    psi = (
        granulated_kendall(mu, gap, hp, rng, axes=training, resamples=resamples)
        if training
        else Granulated(math.nan, {}, {})
    )
    sets = [(*data_axes, *extra) for k in range(3) for extra in itertools.combinations(training, k)]
    cmi = conditional_mutual_information(mu, gap, hp, conditioning_sets=sets, within=cells)
    return FixedDataScores(tau, psi, cmi, tuple(data_axes), len(set(cells)), int(np.isfinite(mu).sum()))


def rescaled_tau(rows: Sequence[dict], measure: str, rescaling: str) -> tuple[float, float, int]:
    """Kendall τ with the gap of ``measure`` as trained and after ``rescaling``, over the included
    models where both values are finite (so the change is the measure's, not the sample's); and how
    many models that is."""
    rows = [r for r in included(rows) if math.isfinite(r[measure]) and math.isfinite(r[f"{rescaling}:{measure}"])]
    gap = np.array([r["gap"] for r in rows], dtype=float)
    before = kendall_tau(np.array([r[measure] for r in rows], dtype=float), gap)
    after = kendall_tau(np.array([r[f"{rescaling}:{measure}"] for r in rows], dtype=float), gap)
    return before, after, len(rows)


def measure_failures(rows: Sequence[dict]) -> dict[str, int]:
    """How many included models each measure column failed on (``<rescaling>:<name>`` kept apart)."""
    counts: dict[str, int] = {}
    for row in included(rows):
        for column in row["failed_measures"].split():
            counts[column] = counts.get(column, 0) + 1
    return counts
