"""Dinh et al.'s orbit experiments at toy size: the identities they check hold to round-off."""

import numpy as np
import pytest
import torch

from constructions import rescaling_orbits as orbits
from constructions.specs import MLPRegressionSpec
from evaluators import Objective


@pytest.fixture
def trained(gen):
    return orbits.trained_regression(MLPRegressionSpec(n=12, d=3, hidden=(4,), bias=True), gen, 100)


def test_log_grid_is_rounded_logspace():
    grid = orbits.log_grid(-1, 1, 3)
    assert grid == (0.1, 1.0, 10.0)


def test_scaling_vector_marks_the_two_blocks(trained):
    net, data, _ = trained
    d = orbits.scaling_vector(Objective(net, (data.x, data.y)), 0, 3.0)
    assert (d == 3.0).sum() == 4 * 3 + 4  # first layer's weight and bias ×α
    assert (d == 1 / 3.0).sum() == 4  # the output layer's weight ×1/α; its bias unscaled
    assert (d == 1.0).sum() == 1


def test_function_and_block_law_hold_to_round_off(trained, gen):
    net, data, _ = trained
    changes = orbits.function_changes(net, data, (0.01, 100.0), gen)
    assert {r["rescaling"] for r in changes} == {"T_alpha", "per_neuron", "deep"}
    assert max(r["output_change"] for r in changes) < 1e-12
    law = orbits.block_law_errors(net, data, (0.1, 10.0))
    assert max(r["hessian_error"] for r in law) < 1e-10 and max(r["trace_error"] for r in law) < 1e-10


def test_trace_infimum_matches_the_scalar_search(trained):
    net, data, _ = trained
    t = orbits.trace_along_orbit(net, data, (0.5, 2.0))
    assert t["found_min"] == pytest.approx(t["predicted_min"], rel=1e-8)
    assert t["found_alpha"] == pytest.approx(t["predicted_alpha"], rel=1e-3)  # flat to second order at α*
    assert min(t["traces"]) >= t["predicted_min"] * (1 - 1e-12)


def test_input_scaling_is_c_squared_only_when_compensated(trained, gen):
    from constructions.specs import DigitsSpec

    net, data, _ = trained
    digits, _ = orbits.trained_digits(DigitsSpec(n_train=40, n_test=40, hidden=(8,)), gen, 20)
    fair = orbits.input_scaling_changes(net, data, digits, (10.0,), seed=0, compensate=True)
    assert fair["rows"][0]["block_error"] < 1e-10 and fair["rows"][0]["test_error_change"] == 0
    unfair = orbits.input_scaling_changes(net, data, digits, (10.0,), seed=0, compensate=False)
    assert unfair["rows"][0]["block_error"] > 1e-3


def test_rescale_until_sharper_stops_at_the_first_power_of_two(gen):
    from constructions.specs import DigitsSpec

    clean, _ = orbits.trained_digits(DigitsSpec(n_train=40, n_test=40, hidden=(8,)), gen, 30)
    noisy, _ = orbits.trained_digits(DigitsSpec(n_train=40, n_test=40, hidden=(8,), label_noise=0.5), gen, 30)
    found = orbits.rescale_until_sharper(clean, noisy, 2.0, seed=0)
    ref, after = found["reference"], found["after"]
    assert after["lambda_max"] >= 2 * ref["lambda_max"] and after["trace"] >= 2 * ref["trace"]
    assert np.log2(found["alpha"]) == int(np.log2(found["alpha"]))
    assert after["test_error"] == found["before"]["test_error"]  # T_α keeps the function
    assert torch.is_tensor(clean.data.x)
