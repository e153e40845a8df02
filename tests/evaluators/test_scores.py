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
