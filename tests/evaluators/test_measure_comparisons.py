"""Comparisons of scored measures read the Scores as their docstrings say."""

import math

import pytest

from evaluators import measure_comparisons as compare
from evaluators.scores import ConditionalMI, Granulated, Scores


def _scores(tau, psi, psi_ci=(0.0, 0.0), per_hyper=None):
    return Scores(
        tau=tau, tau_test=tau, psi=Granulated(psi, per_hyper or {}, {}, psi_ci),
        cmi=ConditionalMI(0.1, (), {}, True), models=20,
    )  # fmt: skip


def test_against_baselines_takes_the_best_finite_psi_of_each_group():
    scores = {
        "a": _scores((0.3, 0.1, 0.5), 0.2),
        "b": _scores((0.1, -0.1, 0.3), 0.4),
        "nan": _scores((0.9, 0.8, 1.0), math.nan),
        "norm": _scores((0.2, 0.0, 0.4), 0.3, (0.2, 0.4)),
    }
    out = compare.against_baselines("pop", scores, ("a", "b", "nan"), ("norm",))
    assert out["best_sharpness_measure"] == "b" and out["best_baseline"] == "norm"
    assert out["scored_measures"] == ["a", "b"] and out["scored_baselines"] == ["norm"]
    assert out["tau_ci_above_0"] == ["a"]
    with pytest.raises(ValueError, match="population 'pop'"):
        compare.against_baselines("pop", scores, ("nan",), ("norm",))


def test_weak_correlation_and_spread():
    assert compare.weak_correlation(_scores((0.5, 0.35, 0.6), 0.0))["ci_min_abs_tau"] == 0.35
    assert compare.weak_correlation(_scores((-0.5, -0.6, -0.4), 0.0))["ci_min_abs_tau"] == 0.4
    assert compare.weak_correlation(_scores((0.1, -0.1, 0.3), 0.0))["ci_min_abs_tau"] == 0.0
    spread = compare.psi_spread({"m": _scores((0, 0, 0), 0.0, per_hyper={"lr": 0.5, "n": -0.2})}, ("m",))
    assert spread == {"m": pytest.approx(0.7)}


def test_largest_tau_changes_keeps_the_largest_and_lets_nan_stick():
    effects = [
        {"measure": "m", "rescaling": "T", "before": 0.1, "after": 0.3},
        {"measure": "m", "rescaling": "T", "before": 0.1, "after": 0.15},
        {"measure": "k", "rescaling": "T", "before": math.nan, "after": 0.2},
        {"measure": "k", "rescaling": "T", "before": 0.0, "after": 0.5},
    ]
    changes = compare.largest_tau_changes(effects, ("T", "per-neuron"))
    assert changes["T"]["m"] == pytest.approx(0.2) and math.isnan(changes["T"]["k"])
    assert changes["per-neuron"] == {}


def test_leaderboard_cells_missing_and_best():
    kept = {"pop": [{"m": 1.0, "k": math.nan}, {"m": 2.0, "k": math.nan}]}
    scorable = {"pop": {"m": _scores((0.4, 0.1, 0.6), 0.3), "k": _scores((math.nan,) * 3, math.nan)}}
    board = compare.leaderboard(scorable, kept, {"pop": {"m": 1}}, ("m", "k"))
    assert board["cells"]["k"]["pop"] == "n/a" and board["cells"]["m"]["pop"] is scorable["pop"]["m"]
    assert board["missing"] == ["m on pop (failed on 1 models)"] and board["best"] == {"pop": ["m"]}
