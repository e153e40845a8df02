import math

import pytest

from catalogue.claim import Series
from catalogue.verdicts import combine, tolerance_verdict, worst


def test_nan_never_passes():
    assert math.isnan(worst([0.0, float("nan"), 1e-20]))
    assert tolerance_verdict(float("nan"), 1e-10, 1e-6) == "inconclusive"
    assert tolerance_verdict(1e-12, 1e-10, 1e-6) == "holds"
    assert tolerance_verdict(1e-3, 1e-10, 1e-6) == "refuted"
    assert tolerance_verdict(1e-8, 1e-10, 1e-6) == "inconclusive"
    assert tolerance_verdict(1e-4, 1e-3, 1e-6) == "holds"  # a loose tolerance is never contradicted


def test_nothing_checked_is_an_error():
    with pytest.raises(ValueError, match="nothing was checked"):
        worst([])
    with pytest.raises(ValueError, match="nothing was checked"):
        combine([])
    assert combine(["holds", "inconclusive"]) == "inconclusive"
    assert combine(["holds", "refuted", "inconclusive"]) == "refuted"


def test_series_non_finite_points_become_gaps():
    s = Series(label="a", x=[1, 2, 3], y=[1.0, float("nan"), float("inf")])
    assert s.y == [1.0, None, None]
