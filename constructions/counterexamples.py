"""Pairs of solutions where flatness and generalization come apart or agree by theorem.

Each :class:`Pair` holds two interpolators (or one function in two parametrizations) of the same
training data, with their test losses measured here, so that a measure can be asked which one it
calls flatter (the convention of the panel: a larger value means sharper):

* ``dinh-t-alpha``: a trained ReLU MLP and its T_α image (α = 100, Dinh et al. 2017, Thm 4): one
  function, so a measure that tells them apart depends on the parametrization;
* ``dinh-digits``: a digits MLP fitted to clean labels vs the same MLP fitted to labels half
  replaced at random (Dinh et al. 2017 §5's pair, before their rescaling; both to train MSE ≈ 0);
* ``wen-bias``: Wen, Li, Ma 2023's bias-net memorizer (Prop. 4.1, the flattest interpolator) vs the
  generalizing Eq. 5 net (r = (d+1)^{1/4}), on d = 10 hypercube XOR, exact population loss;
* ``wen-simln``: the Sim-LN memorizer (Prop. 5.1) vs the Sim-LN generalizer (Prop. 5.2);
* ``vardhan-misaligned``: Vardhan, Taheri, Mazumdar 2026's teacher interpolator of noiseless
  single-index data vs the flattest interpolator on directions misaligned with it (ρ = 0.5);
* ``lyu-gdwd-vs-flow``: Lyu, Li, Arora 2022's BN linear regression (n = 12, d = 40) from one init:
  the final GD+WD iterate (η = 0.1, λ = 0.01, 12/(ηλ) steps; on the Edge-of-Stability 2-cycle, so
  train loss ~1e-4, not 0) vs the gradient-flow-with-WD limit (t = 600); which one generalizes
  better is measured on fresh teacher samples through the equivalent linear model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from constructions import symmetries
from constructions.bn_regression import build_bn_regression, gradient_descent, gradient_flow
from constructions.digits import build_digits
from constructions.mlp_regression import build_mlp_regression
from constructions.multi_index import (
    Interpolator,
    aligned_interpolator,
    build_multi_index,
    flattest_on_directions,
    misaligned_directions,
)
from constructions.specs import BNLinearRegressionSpec, DigitsSpec, MLPRegressionSpec, MultiIndexSpec, XorSpec
from constructions.training import train_lbfgs
from constructions.xor import (
    bias_generalizer,
    bias_memorizer,
    build_xor,
    simln_generalizer,
    simln_memorizer,
)
from evaluators import Objective, mse

__all__ = ["Pair", "counterexample_pairs"]


@dataclass(frozen=True)
class Pair:
    """Two solutions (of one training set; for ``dinh-digits`` of one set of inputs with clean and
    partly random labels); ``better`` generalizes at least as well as ``worse`` (equal when
    ``same_function``)."""

    name: str
    source: str
    better_label: str
    worse_label: str
    better: Objective
    worse: Objective
    test_loss_better: float
    test_loss_worse: float
    same_function: bool = False


def _dinh_pair(generator: torch.Generator) -> Pair:
    problem = build_mlp_regression(MLPRegressionSpec(n=24, d=3, hidden=(5,), noise=0.1), generator)
    train_lbfgs(problem.model, mse, problem.data.x, problem.data.y, max_iter=300)
    rescaled = symmetries.layer_rescale(problem.model, 0, 100.0)
    with torch.no_grad():
        losses = [float(mse(net(problem.data.x_test), problem.data.y_test)) for net in (problem.model, rescaled)]
    return Pair(
        "dinh-t-alpha",
        "Dinh et al. 2017, Thm 4: T_α (α = 100) leaves the function unchanged",
        "trained net",
        "its T_α image",
        Objective(problem.model, (problem.data.x, problem.data.y)),
        Objective(rescaled, (problem.data.x, problem.data.y)),
        *losses,
        same_function=True,
    )


def _digits_pair(generator: torch.Generator) -> Pair:
    fitted = {}
    for noise in (0.0, 0.5):
        problem = build_digits(DigitsSpec(n_train=150, n_test=500, hidden=(64,), label_noise=noise), generator)
        train_lbfgs(problem.model, mse, problem.data.x, problem.data.y, max_iter=1500)
        with torch.no_grad():
            test = float(mse(problem.model(problem.data.x_test), problem.data.y_test))
        fitted[noise] = (Objective(problem.model, (problem.data.x, problem.data.y)), test)
    return Pair(
        "dinh-digits",
        "Dinh et al. 2017, §5: a net fitted to clean labels vs one fitted to 50% random labels, equal train loss",
        "clean labels",
        "50% random labels",
        fitted[0.0][0],
        fitted[0.5][0],
        fitted[0.0][1],
        fitted[0.5][1],
    )


def _cube_loss(net: nn.Module, data) -> float:
    x, y, weight = data.support()
    with torch.no_grad():
        return float((weight * (net(x).reshape(-1) - y) ** 2).sum())


def _wen_pairs(generator: torch.Generator, d: int = 10, n: int = 40) -> list[Pair]:
    data = build_xor(XorSpec(d=d, n=n), generator)
    pairs = []
    for name, source, good, bad in (
        (
            "wen-bias",
            "Wen, Li, Ma 2023, Thm 4.1, Prop. 4.1–4.2: the flattest bias interpolator memorizes",
            bias_generalizer(d),
            bias_memorizer(data),
        ),
        (
            "wen-simln",
            "Wen, Li, Ma 2023, Thm 5.1, Prop. 5.1–5.2: a flattest Sim-LN interpolator memorizes",
            simln_generalizer(d),
            simln_memorizer(data),
        ),
    ):
        pairs.append(
            Pair(
                name,
                source,
                "generalizer",
                "memorizer",
                Objective(good, (data.x, data.y)),
                Objective(bad, (data.x, data.y)),
                _cube_loss(good, data),
                _cube_loss(bad, data),
            )
        )
    return pairs


def _homogeneous_net(interp: Interpolator) -> nn.Sequential:
    m, d = interp.theta.shape
    net = nn.Sequential(nn.Linear(d, m, bias=False), nn.ReLU(), nn.Linear(m, 1, bias=False)).double()
    with torch.no_grad():
        net[0].weight.copy_(torch.from_numpy(interp.theta))
        net[2].weight.copy_(torch.from_numpy(np.asarray(interp.a))[None])
    return net


def _vardhan_pair(generator: torch.Generator, d: int = 16, n: int = 32, width: int = 64) -> Pair:
    problem = build_multi_index(MultiIndexSpec(n=n, d=d), generator)
    teacher = aligned_interpolator(problem)
    misaligned = flattest_on_directions(problem, misaligned_directions(problem, width, 0.5, generator))
    x, y = torch.from_numpy(problem.x), torch.from_numpy(problem.y)
    x_test, y_test = problem.sample(4000, generator)
    nets = [_homogeneous_net(teacher), _homogeneous_net(misaligned)]
    with torch.no_grad():
        losses = [float(mse(net(x_test), y_test)) for net in nets]
    return Pair(
        "vardhan-misaligned",
        "Vardhan, Taheri, Mazumdar 2026, Thm 1: interpolators on misaligned directions are not flattest",
        "teacher",
        "flattest on misaligned directions (ρ = 0.5)",
        Objective(nets[0], (x, y)),
        Objective(nets[1], (x, y)),
        *losses,
    )


def _lyu_pair(generator: torch.Generator, lr: float = 0.1, weight_decay: float = 0.01) -> Pair:
    problem = build_bn_regression(BNLinearRegressionSpec(n=12, d=40), generator)
    w0 = torch.randn(1, 40, generator=generator, dtype=torch.float64)
    steps = round(12 / (lr * weight_decay))
    limits = {
        "GD+WD final iterate": gradient_descent(
            problem, w0, lr=lr, weight_decay=weight_decay, steps=steps, log_every=steps
        ).w,
        "gradient flow + WD limit": gradient_flow(problem, w0, weight_decay=weight_decay, t_end=600.0, n_log=2).w,
    }
    x_test, y_test = problem.fresh_samples(4000, generator)
    losses = {}
    for name, w in limits.items():
        w_tilde, b_tilde = problem.equivalent_linear(w)
        losses[name] = float(((x_test @ w_tilde[0] + b_tilde[0] - y_test) ** 2).mean())
    better, worse = sorted(limits, key=losses.get)
    x, y = problem.data.x, problem.data.y
    return Pair(
        "lyu-gdwd-vs-flow",
        "Lyu, Li, Arora 2022, §5: GD+WD drifts to flatter (spherical sharpness) and, here, better solutions",
        better,
        worse,
        Objective(problem.model(limits[better][0]), (x, y)),
        Objective(problem.model(limits[worse][0]), (x, y)),
        losses[better],
        losses[worse],
    )


def counterexample_pairs(draws: Callable[[str], torch.Generator]) -> list[Pair]:
    """Every pair; ``draws(name)`` gives the generator of one construction's random draws."""
    return [
        _dinh_pair(draws("dinh")),
        _digits_pair(draws("dinh-digits")),
        *_wen_pairs(draws("wen")),
        _vardhan_pair(draws("vardhan")),
        _lyu_pair(draws("lyu")),
    ]
