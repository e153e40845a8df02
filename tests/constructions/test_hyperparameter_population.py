"""The optimization-hyperparameter population: one data draw and start, measured as Andriushchenko et al. do."""

import numpy as np
import pytest

from constructions.batch_size import train_variants
from constructions.hyperparameter_population import HyperparameterGrid, SharpnessSettings, train_and_measure
from constructions.populations import DigitsModel
from evaluators import Objective, adaptive_sharpness

# 150 epochs: the checks below need trained nets, not converged ones (quick to train)
TINY = DigitsModel(width=8, n_train=32, n_test=40, lr=0.2, target_loss=0.05, max_epochs=150)
GRID = HyperparameterGrid(lrs=(0.1, 0.2), batch_sizes=(8,), sam_rhos=(0.0, 0.05))
SETTINGS = SharpnessSettings(batch=16)


@pytest.fixture(scope="module")
def members():
    return train_and_measure(TINY, GRID, SETTINGS, 1, 2, 3)


def test_every_grid_point_once_and_reproducible(members):
    assert [(m.lr, m.sam_rho) for m in members] == [(0.1, 0.0), (0.1, 0.05), (0.2, 0.0), (0.2, 0.05)]
    assert members == train_and_measure(TINY, GRID, SETTINGS, 1, 2, 3)  # seeded: the same numbers


def test_sharpness_is_the_m_sharpness_of_the_trained_net(members):
    """The recorded value is evaluators.adaptive_sharpness on the member's own training set, batch by batch."""
    run = train_variants(TINY, {"a": {"lr": 0.1, "batch_size": 8, "sam_rho": 0.0}}, 1, 2)["a"]
    expected = adaptive_sharpness(Objective(run.model, (run.x, run.y)), SETTINGS.rho, norm="linf", batch_size=16)
    assert members[0].sharpness == pytest.approx(expected.value, rel=1e-12)
    assert all(m.sharpness >= 0 for m in members)  # a lower bound on a maximum over a ball containing 0


def test_ood_error_is_the_test_error_without_noise(members):
    quiet = train_and_measure(TINY, GRID, SETTINGS.model_copy(update={"ood_noise": 1e-12}), 1, 2, 3)
    assert [m.ood_error for m in quiet] == [m.test_error for m in quiet]
    loud = train_and_measure(TINY, GRID, SETTINGS.model_copy(update={"ood_noise": 5.0}), 1, 2, 3)
    assert np.mean([m.ood_error for m in loud]) > np.mean([m.test_error for m in loud])  # noise 13× the pixels' std
