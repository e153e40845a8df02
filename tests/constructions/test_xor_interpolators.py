"""The nearest exact interpolator of trained XOR nets, and the alignment's chance level."""

import numpy as np
import pytest
import torch

import evaluators as ev
from constructions.specs import XorSpec
from constructions.xor import build_xor
from constructions.xor_interpolators import nearest_interpolator, random_alignment
from constructions.xor_training import gauss_newton_trace, init_xor_nets, xor_outputs
from evaluators import Objective


def _near(arch: str, seed: int = 0):
    """Nets that nearly interpolate labels made from their own outputs plus noise 0.05."""
    data = build_xor(XorSpec(d=6, n=12), torch.Generator().manual_seed(seed))
    nets = init_xor_nets(arch, 2, 16, 6, torch.Generator().manual_seed(seed + 1))
    noise = 0.05 * torch.randn(12, generator=torch.Generator().manual_seed(seed + 2), dtype=torch.float64)
    return nets, data.x, xor_outputs(nets, data.x)[0] + noise


@pytest.mark.parametrize("arch", ["nobias", "bias", "simbn", "simln"])
def test_the_projection_interpolates_and_moves_little(arch):
    nets, x, y = _near(arch)
    exact, misfit, moved = nearest_interpolator(nets, x, y)
    assert float(misfit.max()) < 1e-12
    assert float(xor_outputs(exact, x).sub(y).abs().max()) < 1e-12
    assert float(moved.max()) < 0.5  # a 0.05 residual needs a small move, not a different net


def test_the_trace_there_is_the_dense_hessian_trace():
    nets, x, y = _near("bias")
    exact, _, _ = nearest_interpolator(nets, x, y)
    dense = ev.hessian_trace(Objective(exact.module(0), (x, y)), method="exact").value
    # at an exact interpolator Tr ∇²L is the Gauss–Newton trace (Lemma 4.1); residual 1e-12: round-off
    assert float(gauss_newton_trace(exact, x)[0]) == pytest.approx(dense, rel=1e-9)


def test_chance_alignment_matches_direct_sampling():
    rng = np.random.default_rng(0)
    weights = torch.ones(2, 300, dtype=torch.float64)
    chance = random_alignment(weights, 30, 400, rng)
    v = rng.standard_normal((200000, 30))
    expected = float(np.mean(np.linalg.norm(v[:, :2], axis=1) / np.linalg.norm(v, axis=1)))
    # the mean of 600 equally weighted ratios: its spread is ≈ 0.13/√600 ≈ 0.005
    assert np.median(chance) == pytest.approx(expected, abs=0.005)
    one = torch.zeros(2, 300, dtype=torch.float64)
    one[:, 0] = 1.0  # all weight on one neuron per run: far wider than the equal split
    assert np.quantile(random_alignment(one, 30, 400, rng), 0.99) > np.quantile(chance, 0.99) + 0.1
