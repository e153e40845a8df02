"""Population loss: exact enumeration and Monte Carlo intervals."""

import itertools

import pytest
import torch

from evaluators import population_loss, squared_error, zero_one_loss


class Cube:
    """Uniform on {−1, 1}^d with y = x1·x2; finite, or treated as infinite when ``finite=False``."""

    def __init__(self, d: int, finite: bool = True):
        self.d, self.finite = d, finite

    def support_size(self):
        return 2**self.d if self.finite else None

    def support(self):
        x = torch.tensor(list(itertools.product([-1.0, 1.0], repeat=self.d)), dtype=torch.float64)
        return x, x[:, 0] * x[:, 1], torch.full((len(x),), 1 / len(x), dtype=torch.float64)

    def sample(self, n, generator):
        x = torch.randint(0, 2, (n, self.d), generator=generator).double() * 2 - 1
        return x, x[:, 0] * x[:, 1]


def predict(x):  # right on half the cube (x3 = 1), 0.5·y on the other half
    y = x[:, 0] * x[:, 1]
    return torch.where(x[:, 2] > 0, y, 0.5 * y)


def test_exact_enumeration():
    est = population_loss(predict, Cube(4))
    assert est.error_kind == "exact"
    assert est.value == pytest.approx(0.5 * 0.25, abs=1e-15)
    assert population_loss(lambda x: -predict(x), Cube(4), loss=zero_one_loss).value == 1.0


def test_monte_carlo_interval_covers_truth():
    hits = 0
    for seed in range(40):
        est = population_loss(predict, Cube(4, finite=False), samples=2000, seed=seed, loss=squared_error)
        assert est.error_kind == "stderr"
        hits += est.interval[0] <= 0.125 <= est.interval[1]
    assert hits >= 36


def test_large_finite_support_falls_back_to_sampling():
    est = population_loss(predict, Cube(20), samples=1000, max_enumerate=2**10)
    assert est.error_kind == "stderr" and est.extra["support_size"] == 2**20
