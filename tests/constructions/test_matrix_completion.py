"""Matrix completion through BatchNorm: invariances, the sharpness against finite differences, GD+WD."""

import math

import numpy as np
import pytest
import torch

from constructions.matrix_completion import (
    MatrixCompletionSpec,
    build_matrix_completion,
    effective_rank,
    gd_weight_decay,
    initial_weights,
)

SMALL = MatrixCompletionSpec(size=6, rank=2, factor_dim=4, observed=0.6)


@pytest.fixture(scope="module")
def problem_and_start():
    gen = torch.Generator().manual_seed(3)
    problem = build_matrix_completion(SMALL, gen)
    return problem, initial_weights(problem, gen)


def test_loss_is_invariant_to_scaling_each_factor(problem_and_start):
    problem, w = problem_and_start
    u, v = problem.split(w)
    base = float(problem.train_loss(w))
    for cu, cv in ((3.0, 1.0), (1.0, 0.25), (7.0, 0.5)):
        scaled = torch.cat([(cu * u).flatten(), (cv * v).flatten()])
        # the same loss up to round-off: the normalization divides the c·c' factor out exactly
        assert float(problem.train_loss(scaled)) == pytest.approx(base, rel=1e-12)
        assert float(problem.test_loss(scaled)) == pytest.approx(float(problem.test_loss(w)), rel=1e-12)


def test_gradient_is_orthogonal_to_the_weights(problem_and_start):
    # Euler's identity for a scale-invariant L: ⟨∇L(w), w⟩ = 0, which is why plain GD only grows ‖w‖
    problem, w = problem_and_start
    grad = torch.func.grad(problem.train_loss)(w)
    assert abs(float(grad @ w)) <= 1e-12 * float(grad.norm() * w.norm())


def test_spherical_sharpness_matches_a_finite_difference_hessian(problem_and_start):
    problem, w = problem_and_start
    w_bar = w / w.norm()
    grad = torch.func.grad(problem.train_loss)
    h = 1e-5  # central differences of the exact gradient: O(h²) ≈ 1e-10 truncation, round-off ≈ 1e-16/h
    columns = [(grad(w_bar + h * e) - grad(w_bar - h * e)) / (2 * h) for e in torch.eye(len(w), dtype=w.dtype)]
    dense = torch.stack(columns)
    dense = (dense + dense.T) / 2
    reference = float(torch.linalg.eigvalsh(dense)[-1])
    assert problem.spherical_sharpness(w) == pytest.approx(reference, rel=1e-7)
    assert problem.spherical_sharpness(5.0 * w) == pytest.approx(problem.spherical_sharpness(w), rel=1e-12)


def test_effective_rank_counts_equal_singular_values():
    assert effective_rank(torch.diag(torch.tensor([2.0, 2.0, 0.0], dtype=torch.float64))) == pytest.approx(2.0)
    assert effective_rank(torch.eye(5, dtype=torch.float64)) == pytest.approx(5.0)
    # unequal values: between 1 and the rank, exp of the entropy of s/‖s‖₁
    s = np.array([3.0, 1.0])
    p = s / s.sum()
    expected = math.exp(-(p * np.log(p)).sum())
    assert effective_rank(torch.diag(torch.tensor(s))) == pytest.approx(expected, rel=1e-12)


def test_gd_weight_decay_takes_the_documented_step(problem_and_start):
    problem, w = problem_and_start
    lr, wd = 0.05, 0.1
    run = gd_weight_decay(problem, w, lr=lr, weight_decay=wd, steps=3, log_every=1)
    expected = w.clone()
    for _ in range(3):
        expected = (1 - lr * wd) * expected - lr * torch.func.grad(problem.train_loss)(expected)
    torch.testing.assert_close(run.w, expected, rtol=1e-12, atol=1e-14)
    assert list(run.steps) == [0, 1, 2, 3]
    assert run.train_loss[0] == pytest.approx(float(problem.train_loss(w)))
    eff_lr = lr / ((1 - lr * wd) * float(w.norm()) ** 2)
    assert run.eos[0] == pytest.approx(eff_lr * problem.spherical_sharpness(w))


def test_first_fit_and_a_bad_mask():
    gen = torch.Generator().manual_seed(0)
    problem = build_matrix_completion(SMALL, gen)
    run = gd_weight_decay(problem, initial_weights(problem, gen), lr=0.1, weight_decay=0.0, steps=2, log_every=1)
    assert run.first_fit(float("inf")) == 0 and run.first_fit(-1.0) is None
    with pytest.raises(ValueError, match="observed"):
        build_matrix_completion(SMALL.model_copy(update={"observed": 1.0}), gen)
