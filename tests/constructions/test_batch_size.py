"""Small- vs large-batch pairs: the same start, the measurements against dense references."""

import numpy as np
import pytest
import torch

from constructions.batch_size import BatchPairSpec, line_losses, measure_solution, train_pair
from constructions.populations import DigitsModel
from evaluators import Objective
from evaluators.objective import mse

TINY = BatchPairSpec(
    model=DigitsModel(width=16, n_train=32, n_test=40, lr=0.2, target_loss=0.05, max_epochs=2000),
    small_batch=8,
    large_batch=32,
    eps=(1e-3,),
)


@pytest.fixture(scope="module")
def pair():
    return train_pair(TINY, 1, 2)


def test_a_pair_shares_its_data_and_start(pair):
    small, large = pair
    assert torch.equal(small.x, large.x) and torch.equal(small.x_test, large.x_test)
    same = train_pair(TINY.model_copy(update={"large_batch": 8}), 1, 2)  # one batch size: one solution
    for a, b in zip(same[0].model.parameters(), same[1].model.parameters(), strict=True):
        assert torch.equal(a, b)
    assert small.run.converged and large.run.converged and large.run.epochs > small.run.epochs


def test_measurements_match_dense_references(pair):
    small, _ = pair
    row = measure_solution(small, (1e-3,))
    dense = torch.linalg.eigvalsh(Objective(small.model, (small.x, small.y)).hessian())
    # Lanczos to its default rtol on a 1210-parameter Hessian: 1e-6 relative is far above its residual
    assert row.lambda_max == pytest.approx(float(dense[-1]), rel=1e-6)
    # φ is a maximum over a box that holds θ itself (evaluators' own tests check it against brute force)
    assert row.eps_sharpness[1e-3] >= 0.0
    with torch.no_grad():
        assert row.test_error == pytest.approx(
            float((small.model(small.x_test).argmax(1) != small.y_test.argmax(1)).double().mean())
        )


def test_the_line_passes_through_both_solutions(pair):
    small, large = pair
    train, test, _, _ = line_losses(small, large, np.array([0.0, 1.0]))
    with torch.no_grad():
        assert train[0] == pytest.approx(float(mse(small.model(small.x), small.y)), rel=1e-12)
        assert train[1] == pytest.approx(float(mse(large.model(large.x), large.y)), rel=1e-12)
        assert test[1] == pytest.approx(float(mse(large.model(large.x_test), large.y_test)), rel=1e-12)
