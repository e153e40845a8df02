"""The paired t-interval against scipy's one-sample t-test interval (an independent implementation)."""

import math

import numpy as np
import pytest
from scipy import stats

from evaluators.paired import mean_t_interval


@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
@pytest.mark.parametrize("m", [2, 5, 20])
def test_mean_t_interval_matches_scipy(m, confidence):
    values = np.random.default_rng(m).normal(0.3, 1.7, m)
    mean, (lo, hi) = mean_t_interval(values, confidence)
    ref = stats.ttest_1samp(values, 0.0).confidence_interval(confidence)
    assert mean == pytest.approx(values.mean(), rel=1e-14)
    assert (lo, hi) == pytest.approx((ref.low, ref.high), rel=1e-12)


def test_one_value_has_no_interval_and_equal_values_a_point():
    mean, ci = mean_t_interval([2.0])
    assert mean == 2.0 and all(math.isnan(c) for c in ci)
    assert mean_t_interval([1.5, 1.5, 1.5])[1] == [1.5, 1.5]
