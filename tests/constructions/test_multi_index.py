"""Multi-index data and interpolators: they interpolate, Υ matches its definition."""

import numpy as np
import pytest
import torch

from constructions.multi_index import (
    aligned_interpolator,
    build_multi_index,
    flattest_on_directions,
    misaligned_directions,
    noiseless,
    random_directions,
    teacher_dictionary,
)
from constructions.specs import MultiIndexSpec
from evaluators import min_trace_over_rescalings


@pytest.mark.parametrize("link, m_star", [("single_index", 1), ("sum_single_index", 3), ("product", 2)])
def test_data_and_teacher(gen, link, m_star):
    p = build_multi_index(MultiIndexSpec(n=20, d=10, m_star=m_star, link=link, c=2), gen)
    assert np.allclose(p.theta_star @ p.theta_star.T, np.eye(m_star), atol=1e-12)
    assert np.allclose(p.y, p.labels(p.x))  # noiseless
    x, y = p.sample(5, gen)
    assert x.shape == (5, 10) and y.shape == (5,)


@pytest.mark.parametrize("c", [1, 2])
def test_interpolators_interpolate_and_upsilon_is_consistent(gen, c):
    p = build_multi_index(MultiIndexSpec(n=24, d=12, c=c), gen)
    teacher = aligned_interpolator(p)
    assert np.allclose(teacher.predict(p.x, c), p.y, atol=1e-12)
    for directions in (misaligned_directions(p, 48, 0.0, gen), random_directions(p, 48, gen)):
        interp = flattest_on_directions(p, directions)
        assert np.allclose(interp.predict(p.x, c), p.y, atol=1e-8)
        assert interp.upsilon == pytest.approx(min_trace_over_rescalings(interp.a, interp.theta, p.x, c), rel=1e-9)
    assert teacher.upsilon == pytest.approx(min_trace_over_rescalings(teacher.a, teacher.theta, p.x, c), rel=1e-12)


def test_misaligned_directions_have_the_stated_overlap(gen):
    p = build_multi_index(MultiIndexSpec(n=10, d=30), gen)
    dirs = misaligned_directions(p, 40, 0.3, gen)
    assert np.allclose(np.linalg.norm(dirs, axis=1), 1.0)
    assert np.allclose(dirs @ p.theta_star[0], 0.3)


def test_bad_arguments():
    with pytest.raises(ValueError, match="product"):
        build_multi_index(MultiIndexSpec(link="product", m_star=1), torch.Generator())


def test_optimize_flattest_decreases_upsilon_and_keeps_interpolating(gen):
    from constructions.multi_index import optimize_flattest

    p = build_multi_index(MultiIndexSpec(n=16, d=8, c=1, link="sum_single_index", m_star=2), gen)
    best, history = optimize_flattest(p, random_directions(p, 32, gen), steps=10)
    assert all(b <= a for a, b in zip(history, history[1:], strict=False)) and history[-1] < history[0]
    assert np.allclose(best.predict(p.x, 1), p.y, atol=1e-8)
    assert best.upsilon == pytest.approx(history[-1])


def test_split_teacher_is_flatter_for_c_above_one(gen):
    p = build_multi_index(MultiIndexSpec(n=16, d=8, c=2), gen)
    single, split = aligned_interpolator(p), aligned_interpolator(p, 32)
    assert np.allclose(split.predict(p.x, 2), p.y, atol=1e-12)
    assert split.upsilon == pytest.approx(single.upsilon * 32 ** (1 - 4 / 3), rel=1e-10)  # k^{1−p}


def test_problem_is_a_distribution_for_population_loss(gen):
    from evaluators import population_loss

    p = build_multi_index(MultiIndexSpec(n=16, d=8, c=1), gen)
    teacher = aligned_interpolator(p)
    est = population_loss(teacher.predictor(1), p, samples=2000, seed=0)
    assert est.error_kind == "stderr" and est.value == pytest.approx(0.0, abs=1e-20)  # noiseless teacher


def test_teacher_dictionary_flattest_uses_the_teacher_without_noise(gen):
    problem = build_multi_index(MultiIndexSpec(n=24, d=12, m_star=2, link="sum_single_index"), gen)
    dictionary = teacher_dictionary(problem, 30, gen)
    assert dictionary.shape == (32, 12) and np.array_equal(dictionary[:2], problem.theta_star)
    interp = flattest_on_directions(problem, dictionary)
    np.testing.assert_allclose(interp.predict(problem.x, 1), problem.y, atol=1e-8)
    assert interp.upsilon <= aligned_interpolator(problem).upsilon * (1 + 1e-9)


def test_noiseless_keeps_inputs_and_drops_label_noise(gen):
    problem = build_multi_index(MultiIndexSpec(n=10, d=4, noise=0.5), gen)
    clean = noiseless(problem)
    assert clean.spec.noise == 0 and np.array_equal(clean.x, problem.x) and problem.spec.noise == 0.5
    x, y = clean.sample(50, gen)
    np.testing.assert_allclose(y.numpy(), clean.labels(x.numpy()))
