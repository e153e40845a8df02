"""Deep matrix sensing: the trace formula, the depth-2 certificate and the searches, against exact references.

References: the dense float64 autograd Hessian of the loss in θ (no normalization layer, so
``torch.autograd.functional.hessian`` is exact here), the closed-form balanced factorization of
docs/derivations.md §10, weak duality, and exact recovery in the regime where it is a theorem.
"""

import pytest
import torch

from constructions.matrix_sensing import (
    MatrixSensingSpec,
    build_sensing,
    end_to_end,
    gauss_newton_trace,
    min_frobenius_interpolator,
    min_nuclear_norm,
    min_trace_depth2,
    search_min_trace,
    sensing_loss,
)


def _problem(size=5, rank=1, measurements=12, seed=0):
    return build_sensing(
        MatrixSensingSpec(size=size, rank=rank, measurements=measurements), torch.Generator().manual_seed(seed)
    )


def _grams(a):
    """S = (1/n) Σ A_i A_iᵀ and T = (1/n) Σ A_iᵀ A_i, written out independently of the module."""
    return torch.einsum("nij,nkj->ik", a, a) / len(a), torch.einsum("nji,njk->ik", a, a) / len(a)


def _root(m):
    evals, evecs = torch.linalg.eigh(m)
    return evecs @ torch.diag(evals.sqrt()) @ evecs.T


def _dense_trace(ws, problem):
    shapes = [w.shape for w in ws]
    theta = torch.cat([w.reshape(-1) for w in ws])

    def loss(t):
        parts = torch.split(t, [s.numel() for s in shapes])
        return sensing_loss([p.reshape(s) for p, s in zip(parts, shapes, strict=True)], problem)

    return float(torch.trace(torch.autograd.functional.hessian(loss, theta)))


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_gauss_newton_trace_is_the_hessian_trace_at_an_interpolator(depth):
    problem = _problem()
    found = search_min_trace(problem, depth, starts=1, generator=torch.Generator().manual_seed(1), outer=3, inner=50)
    assert found.residual <= 1e-24
    # at r = 0 the Hessian is (1/n) JᵀJ exactly; the residual term is ≈ 1e-12 × ‖∇²r‖: rel 1e-9 is round-off
    assert _dense_trace(found.factors, problem) == pytest.approx(found.smallest_trace, rel=1e-9)


@pytest.mark.parametrize("depth", [2, 3])
def test_gauss_newton_trace_is_the_hessian_trace_everywhere(depth):
    """r_i is linear in each factor, so ∇²r_i has a zero diagonal and Tr Σ r_i ∇²r_i = 0 at every θ (§10)."""
    problem = _problem()
    g = torch.Generator().manual_seed(2)
    ws = [torch.randn(5, 5, generator=g, dtype=torch.float64) for _ in range(depth)]
    assert float(sensing_loss(ws, problem)) > 0.1  # far from interpolation
    assert _dense_trace(ws, problem) == pytest.approx(float(gauss_newton_trace(ws, problem.a)), rel=1e-12)


def test_depth_one_trace_is_the_same_at_every_interpolator():
    problem = _problem()
    frobenius = min_frobenius_interpolator(problem)
    assert float(sensing_loss([frobenius], problem)) <= 1e-26
    expected = float(problem.a.pow(2).sum() / len(problem.a))
    assert float(gauss_newton_trace([frobenius], problem.a)) == pytest.approx(expected, rel=1e-12)
    assert float(gauss_newton_trace([problem.truth], problem.a)) == pytest.approx(expected, rel=1e-12)


def test_depth2_minimum_over_factorizations_is_the_weighted_nuclear_norm():
    """§10: every factorization of M has trace ≥ 2‖S^½ M T^½‖_*, with equality at the balanced one."""
    problem = _problem(measurements=9)
    a = problem.a
    s_half, t_half = (_root(g) for g in _grams(a))
    g = torch.Generator().manual_seed(3)
    m = torch.randn(5, 2, generator=g, dtype=torch.float64) @ torch.randn(2, 5, generator=g, dtype=torch.float64)
    weighted = s_half @ m @ t_half
    bound = 2 * float(torch.linalg.svdvals(weighted).sum())
    u, sig, vt = torch.linalg.svd(weighted)
    w2 = torch.linalg.solve(s_half, u * sig.sqrt())
    w1 = torch.linalg.solve(t_half, (sig.sqrt()[:, None] * vt).T).T
    assert torch.allclose(w2 @ w1, m, atol=1e-10)
    assert float(gauss_newton_trace([w1, w2], a)) == pytest.approx(bound, rel=1e-10)
    for _ in range(5):
        r = torch.linalg.matrix_exp(0.3 * torch.randn(5, 5, generator=g, dtype=torch.float64))
        assert float(gauss_newton_trace([r @ w1, w2 @ torch.linalg.inv(r)], a)) >= bound * (1 - 1e-12)


@pytest.mark.parametrize("seed", [0, 1])
def test_nuclear_norm_solve_is_certified_and_recovers_in_the_rip_regime(seed):
    problem = _problem(size=8, rank=1, measurements=45, seed=seed)
    solve = min_nuclear_norm(problem.a, problem.b)
    assert solve.lower_bound <= solve.value * (1 + 1e-12)
    assert solve.gap <= 1e-9
    residual = torch.einsum("nij,ij->n", problem.a, solve.matrix) - problem.b
    assert float(residual.abs().max()) <= 1e-10
    # n = 45 of 64 for a rank-1 8 × 8 truth: exact recovery, so the truth's nuclear norm is the value
    assert solve.value == pytest.approx(float(torch.linalg.svdvals(problem.truth).sum()), rel=1e-7)


def test_nuclear_norm_certificate_holds_below_recovery():
    """Below the recovery threshold the minimum is below the truth's norm, and the certificate still brackets it."""
    problem = _problem(size=8, rank=2, measurements=16)
    solve = min_nuclear_norm(problem.a, problem.b)
    assert solve.gap <= 1e-9
    assert solve.value < float(torch.linalg.svdvals(problem.truth).sum())


@pytest.mark.parametrize("depth", [2, 3])
def test_search_interpolates_and_depth2_reaches_the_certificate(depth):
    problem = _problem(size=6, rank=2, measurements=14)
    found = search_min_trace(problem, depth, starts=2, generator=torch.Generator().manual_seed(4))
    assert found.residual <= 1e-24
    residual = torch.einsum("nij,ij->n", problem.a, end_to_end(found.factors)) - problem.b
    assert float(residual.abs().max()) <= 1e-10
    if depth == 2:
        certificate, matrix = min_trace_depth2(problem)
        assert certificate.lower_bound <= found.smallest_trace * (1 + 1e-12)  # never below the certified minimum
        assert found.smallest_trace == pytest.approx(certificate.value, rel=1e-6)
        assert torch.allclose(found.matrix, matrix, atol=1e-4)


def test_search_without_interpolation_goes_below_the_certified_minimum():
    """The control: the same search without the constraint must undercut the bound (the bound is not vacuous)."""
    problem = _problem(size=6, rank=2, measurements=14)
    bound = min_trace_depth2(problem)[0].lower_bound
    free = search_min_trace(problem, 2, starts=1, generator=torch.Generator().manual_seed(5), interpolate=False)
    assert free.smallest_trace < 0.01 * bound


def test_bad_measurement_count_is_rejected():
    with pytest.raises(ValueError, match="measurements must be < size²"):
        _problem(size=4, measurements=16)


def test_depth2_flattest_nuclear_norm_within_the_condition_sandwich():
    """§10: ‖M_flat‖_* ≤ (cond S · cond T)^{1/2} min ‖M‖_* (a theorem; below the recovery threshold it is not tight)."""
    problem = _problem(size=6, rank=2, measurements=14)
    s, t = _grams(problem.a)
    kappa = float(torch.linalg.cond(s) * torch.linalg.cond(t)) ** 0.5
    _, flattest = min_trace_depth2(problem)
    nuclear = min_nuclear_norm(problem.a, problem.b)
    ratio = float(torch.linalg.svdvals(flattest).sum()) / nuclear.lower_bound
    assert 1 - 1e-9 <= ratio <= kappa


def test_nuclear_norm_solve_needs_a_certificate_round():
    problem = _problem()
    with pytest.raises(ValueError, match="max_iter must be ≥ 10"):
        min_nuclear_norm(problem.a, problem.b, max_iter=5, tol=0.0)
