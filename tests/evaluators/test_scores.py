"""Scoring functions on hand-made rankings with known τ, Ψ and mutual information."""

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from evaluators import scores


@pytest.mark.parametrize(
    "x, y",
    [
        ([1, 2, 3, 4, 5], [1, 2, 3, 4, 5]),
        ([1, 2, 3, 4, 5], [5, 4, 3, 2, 1]),
        ([1, 2, 2, 3, 4, 4, 4], [3, 1, 2, 2, 5, 4, 6]),  # ties on both sides: τ_b's normalization matters
        ([0.3, -1.2, 2.2, 0.0, 0.9, 1.1], [1.0, 0.0, 0.0, 1.0, 1.0, 0.0]),
    ],
)
def test_kendall_tau_matches_scipy_tau_b(x, y):
    assert scores.kendall_tau(x, y) == pytest.approx(stats.kendalltau(x, y).statistic, abs=1e-12)


def test_kendall_tau_matches_scipy_on_random_data_with_ties(rng):
    for _ in range(20):
        x, y = rng.integers(0, 5, 30), rng.normal(size=30)
        assert scores.kendall_tau(x, y) == pytest.approx(stats.kendalltau(x, y).statistic, abs=1e-12)


def test_kendall_tau_a_counts_ties_as_zero():
    # pairs: (1,2) concordant, (1,3) concordant, (2,3) tied in x → (1 + 1 + 0) / 3
    assert scores.kendall_tau_a([1, 2, 2], [1, 2, 3]) == pytest.approx(2 / 3)


def test_nan_models_are_left_out():
    x, y = [1, 2, np.nan, 3], [1, 2, 100, 3]
    assert scores.kendall_tau(x, y) == pytest.approx(1.0)
    assert math.isnan(scores.kendall_tau([1, np.nan], [1, 2]))
    assert math.isnan(scores.kendall_tau([1, 1, 1], [1, 2, 3]))  # a constant measure ranks nothing


def test_bootstrap_ci_brackets_tau_and_is_reproducible(rng):
    x = rng.normal(size=40)
    y = x + rng.normal(size=40)
    tau, lo, hi = scores.bootstrap_kendall(x, y, np.random.default_rng(3), resamples=400)
    again = scores.bootstrap_kendall(x, y, np.random.default_rng(3), resamples=400)
    assert (tau, lo, hi) == again
    assert lo < tau < hi and 0 < lo
    perfect = scores.bootstrap_kendall(x, x, np.random.default_rng(3), resamples=100)
    assert perfect == (1.0, 1.0, 1.0)


def test_paired_kendall_difference_against_scipy(rng):
    from scipy import stats

    x = rng.normal(size=30)
    strong, null = x + 0.3 * rng.normal(size=30), rng.normal(size=30)
    diff, lo, hi = scores.paired_kendall_difference(x, strong, null, np.random.default_rng(4), resamples=400)
    expected = abs(stats.kendalltau(x, strong).statistic) - abs(stats.kendalltau(x, null).statistic)
    assert diff == pytest.approx(expected, abs=1e-12)
    assert 0 < lo < diff < hi  # a strong ranking against noise: the paired interval excludes 0
    swapped = scores.paired_kendall_difference(x, null, strong, np.random.default_rng(4), resamples=400)
    assert swapped == pytest.approx((-diff, -hi, -lo), abs=1e-12)  # same resamples, mirrored


def test_paired_kendall_difference_drops_resamples_without_a_tau():
    """A three-valued hyperparameter leaves some resamples constant; scipy's paired bootstrap would give NaN."""
    x = np.arange(12.0)
    levels = np.repeat([0.1, 0.2, 0.3], 4)
    diff, lo, hi = scores.paired_kendall_difference(x, levels, -x, np.random.default_rng(0), resamples=300)
    assert np.isfinite([diff, lo, hi]).all() and lo <= diff <= hi


def _grid(levels=(2, 2, 3)):
    combos = list(itertools.product(*(range(k) for k in levels)))
    return {f"h{i}": [c[i] for c in combos] for i in range(len(levels))}


def test_granulated_kendall_hand_made():
    hp = _grid()
    h0, h1, h2 = (np.array(hp[k]) for k in ("h0", "h1", "h2"))
    gap = 1.0 * h0 + 10.0 * h1 + 100.0 * h2
    # the measure follows h0 and h2 but runs against h1: ψ_h0 = 1, ψ_h1 = −1, ψ_h2 = 1
    measure = 1.0 * h0 - 10.0 * h1 + 100.0 * h2
    g = scores.granulated_kendall(measure, gap, hp)
    assert g.per_hyperparameter == pytest.approx({"h0": 1.0, "h1": -1.0, "h2": 1.0})
    assert g.psi == pytest.approx(1 / 3)
    assert g.groups == {"h0": 6, "h1": 6, "h2": 4}
    assert scores.granulated_kendall(gap, gap, hp).psi == pytest.approx(1.0)
    assert scores.granulated_kendall(-gap, gap, hp).psi == pytest.approx(-1.0)


def test_granulated_kendall_mixed_groups_and_ci():
    hp = _grid((2, 3))
    gap = np.arange(6.0)
    measure = np.array([0.0, 1.0, 2.0, 3.0, 5.0, 4.0])  # the last h1-group of three has one discordant pair
    g = scores.granulated_kendall(measure, gap, hp, np.random.default_rng(0), resamples=200)
    # h1 groups (h0 = 0): τ_a = 1; (h0 = 1): pairs (3,5),(3,4) concordant, (5,4) discordant → 1/3
    assert g.per_hyperparameter["h1"] == pytest.approx((1 + 1 / 3) / 2)
    assert g.per_hyperparameter["h0"] == pytest.approx(1.0)
    assert g.interval[0] <= g.psi <= g.interval[1]


def test_granulated_kendall_skips_groups_broken_by_exclusion():
    hp = _grid((2, 2))
    measure = [1.0, 2.0, np.nan, 4.0]  # model (h0=1, h1=0) excluded: its groups have one model
    g = scores.granulated_kendall(measure, [1.0, 2.0, 3.0, 4.0], hp)
    assert g.groups == {"h0": 1, "h1": 1}


def test_grid_completeness():
    assert scores.grid_completeness(_grid()) == (True, 12, 12)
    partial = {k: v[:-1] for k, v in _grid().items()}
    assert scores.grid_completeness(partial) == (False, 12, 11)


def _mi_by_hand(a, b):
    a, b = np.asarray(a), np.asarray(b)
    mi = 0.0
    for u in np.unique(a):
        for v in np.unique(b):
            pj = np.mean((a == u) & (b == v))
            if pj > 0:
                mi += pj * math.log2(pj / (np.mean(a == u) * np.mean(b == v)))
    return mi


def test_cmi_empty_conditioning_set_is_normalized_mutual_information(rng):
    """The PGDL program's ∅ path does not run; ours equals I(V_μ; V_g)/H(V_g) computed by hand."""
    gap = rng.normal(size=9)
    measure = gap + rng.normal(size=9)
    hp = {"h": [0, 1, 2] * 3}
    j, k = np.where(~np.eye(9, dtype=bool))
    vg, vm = np.sign(gap[j] - gap[k]), np.sign(measure[j] - measure[k])
    p = np.mean(vg > 0)
    expected = _mi_by_hand(vm, vg) / -(p * math.log2(p) + (1 - p) * math.log2(1 - p))
    got = scores.conditional_mutual_information(measure, gap, hp, conditioning_sets=[()])
    assert got.value == pytest.approx(expected, rel=1e-12)
    assert got.argmin == ()


def test_cmi_perfect_and_uninformative_measures():
    hp = _grid()
    gap = np.arange(12.0)
    assert scores.conditional_mutual_information(gap, gap, hp).value == pytest.approx(1.0)
    assert scores.conditional_mutual_information(np.ones(12), gap, hp).value == pytest.approx(0.0, abs=1e-12)


def test_cmi_conditioning_removes_a_confounder():
    """A measure that only tracks h0 predicts the gap (driven mostly by h0) unconditioned, not once h0 is fixed."""
    hp = _grid()
    h0 = np.array(hp["h0"], dtype=float)
    gap = 10 * h0 + np.arange(12.0) / 100
    measure = h0 + 0.0
    res = scores.conditional_mutual_information(measure, gap, hp)
    assert res.per_set[()] > 0.5
    assert res.per_set[("h0",)] == pytest.approx(0.0, abs=1e-12)
    assert res.value == pytest.approx(0.0, abs=1e-12) and "h0" in res.argmin
    assert res.complete_grid


def test_cmi_rejects_unknown_conditioning_hyperparameter():
    with pytest.raises(ValueError, match="unknown hyperparameter 'nope'"):
        scores.conditional_mutual_information([1, 2], [1, 2], {"h": [0, 1]}, conditioning_sets=[("nope",)])


# ------------------------------------------------------------------------------ fixed data
def test_granulated_kendall_by_default_averages_every_axis_with_the_resamples_it_always_drew():
    """Pinned to the implementation before ``axes`` existed (the same Ψ, intervals and draws)."""
    rng = np.random.default_rng(5)
    hp = _grid((3, 3, 4))
    gap = rng.normal(size=36)
    measure = gap + rng.normal(size=36)
    g = scores.granulated_kendall(measure, gap, hp, np.random.default_rng(3), resamples=200)
    assert g.psi == pytest.approx(0.574074074074074, abs=1e-15)
    assert g.interval == pytest.approx((0.46219135802469147, 0.6976851851851852), abs=1e-15)
    assert g.per_hyperparameter_interval["h0"] == pytest.approx((0.10972222222222243, 0.6666666666666666), abs=1e-15)


def test_granulated_kendall_axes_average_a_subset_and_keep_every_group_fixed():
    hp = _grid()
    h0, h1, h2 = (np.array(hp[k]) for k in ("h0", "h1", "h2"))
    gap = 1.0 * h0 + 10.0 * h1 + 100.0 * h2
    measure = 1.0 * h0 - 10.0 * h1 + 100.0 * h2  # ψ = (1, −1, 1), as in the hand-made case
    every = scores.granulated_kendall(measure, gap, hp)
    sub = scores.granulated_kendall(measure, gap, hp, np.random.default_rng(3), axes=("h0", "h1"), resamples=200)
    assert sub.psi == pytest.approx(0.0)  # (ψ_h0 + ψ_h1)/2
    assert sub.per_hyperparameter == pytest.approx(every.per_hyperparameter)  # h2 still reported, still held fixed
    assert sub.interval == (0.0, 0.0)  # every group of h0 says +1, every group of h1 says −1
    assert math.isnan(scores.granulated_kendall(measure, gap, {"h0": hp["h0"]}, axes=()).psi)
    with pytest.raises(ValueError, match="unknown hyperparameter 'nope'"):
        scores.granulated_kendall(measure, gap, hp, axes=("nope",))


def test_paired_psi_difference_is_the_difference_of_psis_on_shared_resamples(rng):
    hp = _grid((3, 3, 4))
    h = {k: np.array(v, dtype=float) for k, v in hp.items()}
    gap = h["h0"] + 2 * h["h1"] + 3 * h["h2"] + 0.5 * rng.normal(size=len(h["h0"]))
    good, noise = gap + 0.3 * rng.normal(size=len(gap)), rng.normal(size=len(gap))
    diff, lo, hi = scores.paired_psi_difference([good], [noise], gap, hp, np.random.default_rng(1), resamples=400)
    expected = scores.granulated_kendall(good, gap, hp).psi - scores.granulated_kendall(noise, gap, hp).psi
    assert diff == pytest.approx(expected, abs=1e-12)
    assert 0 < lo <= diff <= hi  # a good measure against noise: the paired interval excludes 0
    assert scores.paired_psi_difference([good], [good], gap, hp, np.random.default_rng(1)) == (0.0, 0.0, 0.0)
    swapped = scores.paired_psi_difference([noise], [good], gap, hp, np.random.default_rng(1), resamples=400)
    assert swapped == pytest.approx((-diff, -hi, -lo), abs=1e-12)
    on_h0 = scores.paired_psi_difference([good], [noise], gap, hp, np.random.default_rng(1), axes=("h0",))
    g0, n0 = (scores.granulated_kendall(m, gap, hp).per_hyperparameter["h0"] for m in (good, noise))
    assert on_h0[0] == pytest.approx(g0 - n0, abs=1e-12)


def test_paired_psi_difference_takes_the_best_of_each_group_in_every_resample(rng):
    """Two equally good measures on one side: the maximum of the two, resample by resample, is at
    least either one, so the interval of best − other lies above that of one measure − other."""
    hp = _grid((3, 3, 4))
    gap = rng.normal(size=36)
    a, b, other = gap + rng.normal(size=36), gap + rng.normal(size=36), gap + rng.normal(size=36)
    both = scores.paired_psi_difference([a, b], [other], gap, hp, np.random.default_rng(2), resamples=300)
    only_a = scores.paired_psi_difference([a], [other], gap, hp, np.random.default_rng(2), resamples=300)
    only_b = scores.paired_psi_difference([b], [other], gap, hp, np.random.default_rng(2), resamples=300)
    assert both[0] == pytest.approx(max(only_a[0], only_b[0]))
    assert both[1] >= max(only_a[1], only_b[1]) - 1e-12 and both[2] >= max(only_a[2], only_b[2]) - 1e-12


def test_paired_psi_difference_uses_the_models_every_measure_scores():
    hp = _grid((2, 3))
    gap = np.arange(6.0)
    m1, m2 = gap.copy(), -gap
    m2[5] = np.nan  # a measure that does not apply to one model: both Ψ drop it
    diff, _, _ = scores.paired_psi_difference([m1], [m2], gap, hp, np.random.default_rng(0), resamples=20)
    m1_dropped = m1.copy()
    m1_dropped[5] = np.nan
    expected = scores.granulated_kendall(m1_dropped, gap, hp).psi - scores.granulated_kendall(m2, gap, hp).psi
    assert diff == pytest.approx(expected)


def test_stratified_kendall_is_the_mean_of_scipy_taus_within_strata(rng):
    strata = np.repeat(["a", "b", "c"], [8, 12, 2])  # "c" has too few models and is left out
    x = rng.normal(size=22)
    y = x + rng.normal(size=22)
    y[:8] = -x[:8] + 0.1 * rng.normal(size=8)  # stratum "a" ranks the other way
    tau, lo, hi = scores.stratified_kendall(x, y, strata, np.random.default_rng(0), resamples=300)
    expected = np.mean([stats.kendalltau(x[strata == s], y[strata == s]).statistic for s in ("a", "b")])
    assert tau == pytest.approx(expected, abs=1e-12)
    assert lo <= tau <= hi
    again = scores.stratified_kendall(x, y, strata, np.random.default_rng(0), resamples=300)
    assert again == (tau, lo, hi)
    assert all(math.isnan(v) for v in scores.stratified_kendall(x[:2], y[:2], ["a", "a"], np.random.default_rng(0)))


@pytest.mark.parametrize("size", [8, 3])
def test_stratified_kendall_resamples_within_strata_only(size):
    """Cells ordered perfectly one way and the other: τ̄ = 0 in every resample that keeps both cells,
    so the interval is exactly 0 (a pooled resample would mix the cells; a resample that lost a cell's τ
    would average the other alone and give ±1)."""
    x = np.tile(np.arange(float(size)), 2)
    y = np.concatenate([np.arange(float(size)), -np.arange(float(size))])
    strata = np.repeat(["up", "down"], size)
    tau, lo, hi = scores.stratified_kendall(x, y, strata, np.random.default_rng(1), resamples=500)
    assert (tau, lo, hi) == (0.0, 0.0, 0.0)
    one = scores.stratified_kendall([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], ["a"] * 3, np.random.default_rng(4), resamples=1)
    assert one[0] == 1.0 and math.isnan(one[1]) and math.isnan(one[2])  # its one resample has no τ: no interval


def test_cmi_within_cells_counts_only_pairs_on_the_same_data():
    """Within each of two cells the measure ranks the gap perfectly; across cells it is reversed.
    Over all pairs the mutual information is not perfect; over same-cell pairs it is."""
    gap = np.array([0.0, 1, 2, 3, 10, 11, 12, 13])
    measure = np.array([10.0, 11, 12, 13, 0, 1, 2, 3])
    cell = ["a"] * 4 + ["b"] * 4
    hp = {"cell": cell, "lr": [0, 1, 0, 1, 0, 1, 0, 1]}
    pooled = scores.conditional_mutual_information(measure, gap, hp, conditioning_sets=[()])
    within = scores.conditional_mutual_information(measure, gap, hp, conditioning_sets=[()], within=cell)
    assert pooled.value < 0.5 and within.value == pytest.approx(1.0)


def test_fixed_data_scores_are_not_fooled_by_a_data_axis(rng):
    """A measure that only tracks the training-set size: pooled τ is strong, on fixed data it is noise."""
    hp = _grid((2, 3, 3))
    rows = []
    for n, lr, width in zip(hp["h0"], hp["h1"], hp["h2"], strict=True):
        for rep in range(3):
            gap = -1.0 * n + 0.01 * rng.normal()  # more data, smaller gap; lr and width do nothing
            rows.append({"n": n, "lr": lr, "width": width, "rep": rep, "gap": gap, "converged": True,
                         "test_error": 0.0, "test_loss": 0.0, "tracks_n": -float(n) + 1e-3 * rng.normal()})  # fmt: skip
    hyper = ("n", "lr", "width", "rep")
    pooled = scores.score_population(rows, hyper, "tracks_n", np.random.default_rng(0), 200)
    fixed = scores.score_fixed_data(rows, hyper, ("n",), "tracks_n", np.random.default_rng(0), 200)
    assert pooled.tau[1] > 0.3  # pooled over n: a strong, spurious correlation
    assert fixed.tau[1] < 0 < fixed.tau[2] and abs(fixed.tau[0]) < 0.2  # within a training set: none
    assert fixed.psi.per_hyperparameter["n"] == pytest.approx(1.0)  # the data axis's own ψ, reported apart
    assert abs(fixed.psi.psi) < 0.3 and fixed.cells == 2 and fixed.data_axes == ("n",)
    assert all(s[0] == "n" for s in fixed.cmi.per_set) and len(fixed.cmi.per_set) == 1 + 3 + 3  # n ∪ ≤ 2 of 3
    assert fixed.cmi.value < 0.05 and fixed.models == len(rows)
