"""The standard panel of measures, by name, for claims that compare many of them.

Each entry maps an :class:`~evaluators.Objective` (and a seed) to an
:class:`~evaluators.Estimate`. Measures that need a particular structure say so in ``applies``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import nn

import evaluators as ev
from evaluators import Estimate, Objective

__all__ = ["Measure", "PANEL", "INVARIANCE", "panel_for"]


@dataclass(frozen=True)
class Measure:
    name: str
    compute: Callable[[Objective, int], Estimate]
    applies: Callable[[Objective], bool] = lambda obj: True
    stochastic: bool = False


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


def _symmetry_min_trace(obj: Objective, seed: int) -> Estimate:
    params = obj.unflatten(obj.theta)
    theta, a = params["0.weight"].numpy(), params["2.weight"][0].numpy()
    value = ev.symmetry_minimized_trace(a, theta, obj.inputs.numpy(), 1.0)
    return Estimate(value, 0.0, "exact")


def _spherical(obj: Objective, seed: int) -> Estimate:
    first = [n for n in obj.layout.names if n.startswith("0.")]  # the layer feeding the normalization
    return ev.spherical_sharpness(obj, params=first, seed=seed)


PANEL: tuple[Measure, ...] = (
    Measure("lambda_max", lambda o, s: ev.hessian_top_eigenvalue(o, rtol=1e-10, seed=s)),
    Measure("trace", lambda o, s: ev.hessian_trace(o, method="auto", seed=s)),
    Measure("eps_sharpness_1e-3", lambda o, s: ev.epsilon_sharpness(o, 1e-3)),
    Measure(
        "adaptive_worst_linf",
        lambda o, s: ev.adaptive_sharpness(o, 1e-3, norm="linf", kind="worst"),
    ),
    Measure("adaptive_worst_l2", lambda o, s: ev.adaptive_sharpness(o, 0.1, norm="l2", kind="worst")),
    Measure(
        "adaptive_average",
        lambda o, s: ev.adaptive_sharpness(o, 0.1, kind="average", samples=200, seed=s),
        stochastic=True,
    ),
    Measure("asam_abs+eta_linf", lambda o, s: ev.adaptive_sharpness(o, 1e-3, scale="abs+eta")),
    Measure("relative_flatness_layer1", lambda o, s: ev.relative_flatness(o, _first_weight(o))),
    Measure("fisher_rao", lambda o, s: ev.fisher_rao_norm(o)),
    Measure(
        "pacbayes_sigma_inv2",
        lambda o, s: ev.pacbayes_flatness(o, metric="loss", target=0.1, seed=s),
        stochastic=True,
    ),
    Measure(
        "pacbayes_mag_sigma_inv2",
        lambda o, s: ev.pacbayes_flatness(o, metric="loss", target=0.1, magnitude_aware=True, seed=s),
        stochastic=True,
    ),
    Measure("spherical_sharpness", _spherical, applies=_has_normalization),
    Measure("symmetry_min_trace", _symmetry_min_trace, applies=_two_layer_relu_homogeneous),
    Measure("param_l2_norm", lambda o, s: ev.parameter_norm(o)),
    Measure("path_norm", lambda o, s: ev.path_norm(o), applies=_plain_mlp),
    Measure("spectral_product", lambda o, s: ev.spectral_norm_product(o), applies=_plain_mlp),
)


def panel_for(obj: Objective) -> list[Measure]:
    """The measures of the panel that apply to ``obj``."""
    return [m for m in PANEL if m.applies(obj)]


# What theory predicts: True = invariant, False = changes, None = no exact prediction (not scored).
# Invariance of adaptive (c = |θ|), Fisher–Rao and relative flatness follows from θ' = Dθ with D
# diagonal positive: the loss, its gradient (D⁻¹∇) and Hessian (D⁻¹HD⁻¹) transform so that each
# measure is unchanged. Permutations leave every deterministic measure unchanged; Monte Carlo
# measures only in distribution (their fixed draws are not permuted), scored within 4 standard
# errors where one is reported. Path norms ignore biases and are unchanged by T_α and per-neuron
# rescaling, not by input scaling.
T, F, N = True, False, None
INVARIANCE: dict[str, dict[str, bool | None]] = {
    "lambda_max": dict(layer_T_alpha=F, neuron_alpha=F, permutation=T, input_scale=F, bn_scale=F, ln_scale=F),
    "trace": dict(layer_T_alpha=F, neuron_alpha=F, permutation=T, input_scale=F, bn_scale=F, ln_scale=F),
    "eps_sharpness_1e-3": dict(layer_T_alpha=F, neuron_alpha=F, permutation=T, input_scale=F, bn_scale=F, ln_scale=F),
    "adaptive_worst_linf": dict(layer_T_alpha=T, neuron_alpha=T, permutation=T, input_scale=T, bn_scale=T, ln_scale=T),
    "adaptive_worst_l2": dict(layer_T_alpha=T, neuron_alpha=T, permutation=T, input_scale=T, bn_scale=T, ln_scale=T),
    "adaptive_average": dict(layer_T_alpha=T, neuron_alpha=T, permutation=T, input_scale=T, bn_scale=T, ln_scale=T),
    "asam_abs+eta_linf": dict(layer_T_alpha=F, neuron_alpha=F, permutation=T, input_scale=F, bn_scale=F, ln_scale=F),
    "relative_flatness_layer1": dict(
        layer_T_alpha=T, neuron_alpha=T, permutation=T, input_scale=T, bn_scale=T, ln_scale=T
    ),
    "fisher_rao": dict(layer_T_alpha=T, neuron_alpha=T, permutation=T, input_scale=T, bn_scale=T, ln_scale=T),
    "pacbayes_sigma_inv2": dict(layer_T_alpha=F, neuron_alpha=F, permutation=N, input_scale=F, bn_scale=F, ln_scale=F),
    "pacbayes_mag_sigma_inv2": dict(
        layer_T_alpha=N, neuron_alpha=N, permutation=N, input_scale=N, bn_scale=N, ln_scale=N
    ),
    "spherical_sharpness": dict(bn_scale=T, ln_scale=T),
    # Υ (Vardhan et al. 2026, Lemma 1) is the minimum over the per-neuron orbit: invariant to it by
    # construction; input scaling multiplies it by the scale (κ_j ∝ c², |u_j| ∝ 1/c for ReLU)
    "symmetry_min_trace": dict(layer_T_alpha=T, neuron_alpha=T, permutation=T, input_scale=F),
    "param_l2_norm": dict(layer_T_alpha=F, neuron_alpha=F, permutation=T, input_scale=F, bn_scale=F, ln_scale=F),
    "path_norm": dict(layer_T_alpha=T, neuron_alpha=T, permutation=T, input_scale=F),
    "spectral_product": dict(layer_T_alpha=T, neuron_alpha=F, permutation=T, input_scale=F),
}
