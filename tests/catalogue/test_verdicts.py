import math

import pytest

from catalogue.claim import Series
from catalogue.rules import combine
from catalogue.verdicts import worst


def test_nan_never_passes():
    assert math.isnan(worst([0.0, float("nan"), 1e-20]))


def test_nothing_checked_is_an_error():
    with pytest.raises(ValueError, match="nothing was checked"):
        worst([])
    with pytest.raises(ValueError, match="no parts"):
        combine([])
    assert combine(["holds", "inconclusive"]) == "inconclusive"
    assert combine(["holds", "refuted", "inconclusive"]) == "refuted"


def test_series_non_finite_points_become_gaps():
    s = Series(label="a", x=[1, 2, 3], y=[1.0, float("nan"), float("inf")])
    assert s.y == [1.0, None, None]
