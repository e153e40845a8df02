"""`mean_with_stderr` against scipy's one-sample t-test interval (an independent implementation)."""

import math

import numpy as np
import pytest
from scipy import stats

from evaluators.estimate import mean_with_stderr


@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
@pytest.mark.parametrize("m", [2, 5, 20])
def test_mean_with_stderr_matches_scipy(m, confidence):
    values = np.random.default_rng(m).normal(0.3, 1.7, m)
    mean, se, (lo, hi) = mean_with_stderr(values, confidence)
    ref = stats.ttest_1samp(values, 0.0).confidence_interval(confidence)
    assert mean == pytest.approx(values.mean(), rel=1e-14)
    assert se == pytest.approx(stats.sem(values), rel=1e-12)
    assert (lo, hi) == pytest.approx((ref.low, ref.high), rel=1e-12)


def test_one_value_has_no_finite_interval():
    mean, se, interval = mean_with_stderr([2.0])
    assert mean == 2.0 and math.isinf(se) and not any(math.isfinite(c) for c in interval)
