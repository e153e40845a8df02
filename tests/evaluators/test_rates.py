"""Power-law exponents on log-log axes, and their bootstrap over draws."""

import numpy as np
import pytest

from evaluators.rates import log_log_slope, log_log_slope_bootstrap


@pytest.mark.parametrize("exponent", [-1.5, 0.5, 2.0])
def test_slope_of_an_exact_power_law(exponent):
    x = np.array([2.0, 4.0, 8.0, 16.0])
    assert log_log_slope(x, 3.0 * x**exponent) == pytest.approx(exponent, abs=1e-12)


def test_bootstrap_is_degenerate_without_spread_and_covers_the_rate_with_it(rng):
    x = np.array([32.0, 64.0, 128.0, 256.0])
    exact = np.repeat((x**0.5)[:, None], 6, axis=1)
    slope, lo, hi = log_log_slope_bootstrap(x, exact, rng, 200)
    assert slope == pytest.approx(0.5, abs=1e-12) and lo == pytest.approx(0.5, abs=1e-12) == hi
    noisy = exact * np.exp(0.2 * rng.standard_normal(exact.shape))
    slope, lo, hi = log_log_slope_bootstrap(x, noisy, rng, 500)
    assert lo < slope < hi and lo < 0.5 < hi  # the seeded draw's interval covers the true rate
    assert lo > 0.2 and hi < 0.8  # and is informative: ±0.3 at 6 draws of noise sd 0.2


def test_arithmetic_average_fits_the_log_of_the_means(rng):
    x = np.array([100.0, 200.0, 400.0])
    samples = np.array([[1.0, 3.0], [0.5, 1.5], [0.25, 0.75]])  # means 2, 1, 0.5: slope −1 exactly
    slope, lo, hi = log_log_slope_bootstrap(x, samples, rng, 100, average="arithmetic")
    assert slope == pytest.approx(-1.0, abs=1e-12)
    geometric, _, _ = log_log_slope_bootstrap(x, samples, rng, 1)
    assert geometric == pytest.approx(-1.0, abs=1e-12)  # here both averages halve with n
    assert lo <= slope <= hi
