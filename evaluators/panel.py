"""The standard panel of measures, by name, for claims that compare many of them.

Each entry maps an :class:`~evaluators.Objective` (and a seed) to an
:class:`~evaluators.Estimate`. Measures that need a particular structure say so in ``applies``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from torch import nn

import evaluators as ev
from evaluators import Estimate, Objective
from evaluators.trace import DENSE_TRACE_MAX_PARAMS

__all__ = ["Measure", "PANEL", "INVARIANCE", "panel_for"]


@dataclass(frozen=True)
class Measure:
    """A measure of the panel, registered once: how to compute it, where it applies, and what
    theory predicts of it under each symmetry (``theory``: symmetry → True invariant, False
    changes, None no exact prediction, not scored; a symmetry left out is not audited)."""

    name: str
    compute: Callable[[Objective, int], Estimate]
    applies: Callable[[Objective], bool] = lambda obj: True
    stochastic: bool = False
    theory: dict[str, bool | None] = field(default_factory=dict)


def _first_weight(obj: Objective) -> str:
    return obj.parameter_groups()["weights"][0]


def _plain_mlp(obj: Objective) -> bool:
    return isinstance(obj.module, nn.Sequential) and not _has_normalization(obj)


def _has_normalization(obj: Objective) -> bool:
    return any(isinstance(m, nn.modules.batchnorm._BatchNorm | nn.LayerNorm) for m in obj.module.modules())


def _two_layer_relu_homogeneous(obj: Objective) -> bool:
    """f(x) = Σ_j a_j relu(θ_jᵀx): Linear(no bias) → ReLU → Linear(no bias, one output)."""
    layers = list(obj.module) if isinstance(obj.module, nn.Sequential) else []
    return (
        len(layers) == 3
        and isinstance(layers[0], nn.Linear)
        and isinstance(layers[1], nn.ReLU)
        and isinstance(layers[2], nn.Linear)
        and layers[0].bias is None
        and layers[2].bias is None
        and layers[2].out_features == 1
    )


def _spherical(obj: Objective, seed: int) -> Estimate:
    first = [n for n in obj.layout.names if n.startswith("0.")]  # the layer feeding the normalization
    return ev.spherical_sharpness(obj, params=first, seed=seed)


# Theory (Measure.theory):
# Invariance of adaptive (c = |θ|), Fisher–Rao and relative flatness follows from θ' = Dθ with D
# diagonal positive: the loss, its gradient (D⁻¹∇) and Hessian (D⁻¹HD⁻¹) transform so that each
# measure is unchanged. Permutations leave every deterministic measure unchanged; Monte Carlo
# measures only in distribution (their fixed draws are not permuted), scored within 4 standard
# errors where one is reported. Path norms ignore biases and are unchanged by T_α and per-neuron
# rescaling, not by input scaling.
T, F, N = True, False, None
PANEL: tuple[Measure, ...] = (
    Measure(
        "lambda_max",
        lambda o, s: ev.hessian_top_eigenvalue(o, rtol=1e-10, seed=s),
        theory=dict(layer_T_alpha=F, neuron_alpha=F, permutation=T, input_scale=F, bn_scale=F, ln_scale=F),
    ),
    Measure(
        "trace",
        lambda o, s: ev.hessian_trace(o, method="auto", seed=s, max_hvps=DENSE_TRACE_MAX_PARAMS),
        theory=dict(layer_T_alpha=F, neuron_alpha=F, permutation=T, input_scale=F, bn_scale=F, ln_scale=F),
    ),
    Measure(
        "eps_sharpness_1e-3",
        lambda o, s: ev.epsilon_sharpness(o, 1e-3),
        theory=dict(layer_T_alpha=F, neuron_alpha=F, permutation=T, input_scale=F, bn_scale=F, ln_scale=F),
    ),
    Measure(
        "adaptive_worst_linf",
        lambda o, s: ev.adaptive_sharpness(o, 1e-3, norm="linf", kind="worst"),
        theory=dict(layer_T_alpha=T, neuron_alpha=T, permutation=T, input_scale=T, bn_scale=T, ln_scale=T),
    ),
    Measure(
        "adaptive_worst_l2",
        lambda o, s: ev.adaptive_sharpness(o, 0.1, norm="l2", kind="worst"),
        theory=dict(layer_T_alpha=T, neuron_alpha=T, permutation=T, input_scale=T, bn_scale=T, ln_scale=T),
    ),
    Measure(
        "adaptive_average",
        lambda o, s: ev.adaptive_sharpness(o, 0.1, kind="average", samples=200, seed=s),
        stochastic=True,
        theory=dict(layer_T_alpha=T, neuron_alpha=T, permutation=T, input_scale=T, bn_scale=T, ln_scale=T),
    ),
    Measure(
        "asam_abs+eta_linf",
        lambda o, s: ev.adaptive_sharpness(o, 1e-3, scale="abs+eta"),
        theory=dict(layer_T_alpha=F, neuron_alpha=F, permutation=T, input_scale=F, bn_scale=F, ln_scale=F),
    ),
    Measure(
        "relative_flatness_layer1",
        lambda o, s: ev.relative_flatness(o, _first_weight(o)),
        theory=dict(layer_T_alpha=T, neuron_alpha=T, permutation=T, input_scale=T, bn_scale=T, ln_scale=T),
    ),
    Measure(
        "fisher_rao",
        lambda o, s: ev.fisher_rao_norm(o),
        theory=dict(layer_T_alpha=T, neuron_alpha=T, permutation=T, input_scale=T, bn_scale=T, ln_scale=T),
    ),
    Measure(
        "pacbayes_sigma_inv2",
        lambda o, s: ev.pacbayes_flatness(o, metric="loss", target=0.1, seed=s),
        stochastic=True,
        theory=dict(layer_T_alpha=F, neuron_alpha=F, permutation=N, input_scale=F, bn_scale=F, ln_scale=F),
    ),
    Measure(
        "pacbayes_mag_sigma_inv2",
        lambda o, s: ev.pacbayes_flatness(o, metric="loss", target=0.1, magnitude_aware=True, seed=s),
        stochastic=True,
        theory=dict(layer_T_alpha=N, neuron_alpha=N, permutation=N, input_scale=N, bn_scale=N, ln_scale=N),
    ),
    Measure("spherical_sharpness", _spherical, applies=_has_normalization, theory=dict(bn_scale=T, ln_scale=T)),
    # Υ (Vardhan et al. 2026, Lemma 1) is the minimum over the per-neuron orbit: invariant to it by
    # construction; input scaling multiplies it by the scale (κ_j ∝ c², |u_j| ∝ 1/c for ReLU)
    Measure(
        "symmetry_min_trace",
        lambda o, s: ev.symmetry_minimized_trace(o),
        applies=_two_layer_relu_homogeneous,
        theory=dict(layer_T_alpha=T, neuron_alpha=T, permutation=T, input_scale=F),
    ),
    Measure(
        "param_l2_norm",
        lambda o, s: ev.parameter_norm(o),
        theory=dict(layer_T_alpha=F, neuron_alpha=F, permutation=T, input_scale=F, bn_scale=F, ln_scale=F),
    ),
    Measure(
        "path_norm",
        lambda o, s: ev.path_norm(o),
        applies=_plain_mlp,
        theory=dict(layer_T_alpha=T, neuron_alpha=T, permutation=T, input_scale=F),
    ),
    Measure(
        "spectral_product",
        lambda o, s: ev.spectral_norm_product(o),
        applies=_plain_mlp,
        theory=dict(layer_T_alpha=T, neuron_alpha=F, permutation=T, input_scale=F),
    ),
)


def panel_for(obj: Objective) -> list[Measure]:
    """The measures of the panel that apply to ``obj``."""
    return [m for m in PANEL if m.applies(obj)]


# What theory predicts of each measure, by name (read by the invariance audit and the benchmark).
INVARIANCE: dict[str, dict[str, bool | None]] = {m.name: m.theory for m in PANEL}
