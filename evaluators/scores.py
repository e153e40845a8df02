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

Every function ignores models whose measure or gap is NaN (a measure that does not apply).

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
    "grid_completeness",
    "ConditionalMI",
    "conditional_mutual_information",
    "included",
    "Scores",
    "score_population",
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

    A model drawn twice forms a tied pair, which τ_b leaves out, as it should.
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
    resamples: int = 1000,
    confidence: float = 0.95,
) -> Granulated:
    """Jiang et al. 2020's granulated Kendall coefficient Ψ.

    ``hparams`` maps each hyperparameter that varies over the population to its value per model.
    ψ_i averages τ_a over the groups of ≥ 2 models sharing every other hyperparameter's value; a
    hyperparameter without such a group is left out of Ψ. With ``rng``, the CI resamples each
    hyperparameter's groups with replacement (groups, not models, are the units of ψ_i).
    """
    mu, g = np.asarray(measure, dtype=float), np.asarray(gap, dtype=float)
    if not hparams:
        raise ValueError("granulated_kendall needs at least one hyperparameter")
    for name, values in hparams.items():
        if len(values) != len(mu):
            raise ValueError(f"hyperparameter {name!r} has {len(values)} values for {len(mu)} models")
    keep = np.isfinite(mu) & np.isfinite(g)
    mu_k, g_k = mu[keep], g[keep]
    per: dict[str, np.ndarray] = {}
    for name in hparams:
        taus = [kendall_tau_a(mu_k[idx], g_k[idx]) for idx in _group_ids(hparams, keep, name).values() if len(idx) >= 2]
        if taus:
            per[name] = np.array(taus)
    if not per:
        return Granulated(float("nan"), {}, {})
    psi = float(np.mean([t.mean() for t in per.values()]))
    interval = per_interval = None
    if rng is not None:
        alpha = (1 - confidence) / 2
        boot = {name: t[rng.integers(0, len(t), size=(resamples, len(t)))].mean(axis=1) for name, t in per.items()}
        total = np.mean(np.stack(list(boot.values())), axis=0)
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
) -> ConditionalMI:
    """``min_S I(V_μ; V_g | U_S) / H(V_g | U_S)`` over the conditioning sets (see the module docstring).

    Args:
        measure, gap: one value per model (NaN: left out).
        hparams: each varying hyperparameter's value per model.
        max_set_size: all sets S of at most this many hyperparameters, ∅ included.
        conditioning_sets: explicit sets instead (``[()]`` is the unconditioned score).
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
