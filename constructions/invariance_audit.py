"""How much a measure moves under the function-preserving maps of a network (the invariance audit).

For each symmetry and each strength α of a grid, the net is mapped (its function unchanged up to
round-off), every measure is recomputed with the same seed, and the audit keeps, per measure and
symmetry, the largest relative change ``|m(Tθ) − m(θ)| / |m(θ)|`` over the grid and the same less
``k`` standard errors of the difference for Monte Carlo measures (``change_beyond_noise``).

Symmetries: T_α on the first hidden layer (Dinh et al. 2017), per-neuron rescaling by α^u with
u ~ U(−1, 1), a random permutation of the hidden units, input scaling x → αx with the first
layer ÷α, and scaling the weights feeding a BatchNorm or a LayerNorm. Each symmetry is audited on
the nets it applies to (``NETS_FOR``), a measure on the first of them where it applies.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from constructions import symmetries
from evaluators import Objective

__all__ = ["SYMMETRIES", "NETS_FOR", "AuditedNet", "Audit", "transform", "audit_measures"]

SYMMETRIES = ("layer_T_alpha", "neuron_alpha", "permutation", "input_scale", "bn_scale", "ln_scale")
# which of the audit's nets each symmetry is a symmetry of, in the order a measure is tried
NETS_FOR: dict[str, tuple[str, ...]] = {
    "bn_scale": ("bn",),
    "ln_scale": ("ln",),
    **{s: ("plain", "homogeneous") for s in ("layer_T_alpha", "neuron_alpha", "permutation", "input_scale")},
}


@dataclass(frozen=True)
class AuditedNet:
    """A trained net and its training data."""

    net: torch.nn.Sequential
    x: torch.Tensor
    y: torch.Tensor


@dataclass
class Audit:
    """Per measure and symmetry: the largest relative change over the α grid and that change less
    the Monte Carlo noise; the measures audited under each symmetry, in the order they were; the T_α
    ratios m(T_α θ)/m(θ) along the grid; the largest relative change of the function (round-off)."""

    audited: dict[str, list[str]] = field(default_factory=dict)
    change: dict[str, dict[str, float]] = field(default_factory=dict)
    beyond_noise: dict[str, dict[str, float]] = field(default_factory=dict)
    t_alpha_ratios: dict[str, list[float]] = field(default_factory=dict)
    function_change: float = 0.0


def transform(net, x, symmetry: str, alpha: float, gen: torch.Generator):
    """(module, inputs) after one symmetry at strength α (random draws from ``gen``)."""
    if symmetry == "layer_T_alpha":
        return symmetries.layer_rescale(net, 0, alpha), x
    if symmetry == "neuron_alpha":
        width = symmetries.linear_layers(net)[0].out_features
        exponents = torch.rand(width, generator=gen, dtype=torch.float64) * 2 - 1
        return symmetries.neuron_rescale(net, 0, alpha**exponents), x
    if symmetry == "permutation":
        width = symmetries.linear_layers(net)[0].out_features
        return symmetries.permute_hidden(net, 0, torch.randperm(width, generator=gen)), x
    if symmetry == "input_scale":
        return symmetries.reparametrize_inputs(net, x, alpha)
    if symmetry in ("bn_scale", "ln_scale"):
        return symmetries.scale_before_normalization(net, 0, alpha), x
    raise ValueError(f"unknown symmetry {symmetry!r}; symmetries are {', '.join(SYMMETRIES)}")


def _relative(diff: float, ref: float) -> float:
    return diff / abs(ref) if ref != 0 else (0.0 if diff == 0 else float("inf"))


def _worst(values: Sequence[float]) -> float:
    """The largest value, NaN if any is NaN (a failed measurement is never hidden by a max)."""
    return float("nan") if any(np.isnan(v) for v in values) else max(values)


def audit_measures(
    measures: Sequence,
    nets: Mapping[str, AuditedNet],
    alphas: Sequence[float],
    *,
    seed: int,
    draws: Callable[[str, str], torch.Generator],
    audits: Callable[[object, str], bool] = lambda measure, symmetry: True,
    stderr_multiple: float = 4.0,
) -> Audit:
    """Audit ``measures`` (objects with ``name``, ``compute(obj, seed) -> Estimate`` and
    ``applies(obj)``) under every symmetry of :data:`SYMMETRIES` that ``audits(measure, symmetry)``
    asks for, on ``nets`` keyed as in :data:`NETS_FOR`; ``draws(symmetry, tag)`` gives the
    generator of a symmetry's random draws on one net."""
    audit = Audit()
    for symmetry in SYMMETRIES:
        changes: dict[str, float] = {}
        beyond: dict[str, float] = {}
        for tag in NETS_FOR[symmetry]:
            if tag not in nets:
                continue
            base_net = nets[tag]
            base_obj = Objective(base_net.net, (base_net.x, base_net.y))
            todo = [m for m in measures if m.applies(base_obj) and audits(m, symmetry) and m.name not in changes]
            base = {m.name: m.compute(base_obj, seed) for m in todo}
            gen = draws(symmetry, tag)
            changes.update({m.name: 0.0 for m in todo})
            beyond.update({m.name: 0.0 for m in todo})
            for alpha in alphas:
                module, x = transform(base_net.net, base_net.x, symmetry, alpha, gen)
                obj = Objective(module, (x, base_net.y))
                with torch.no_grad():
                    scale = float(base_obj.forward().abs().max())
                    change = float((obj.forward() - base_obj.forward()).abs().max()) / scale
                    audit.function_change = max(audit.function_change, change)
                for m in todo:
                    est = m.compute(obj, seed)
                    ref = base[m.name]
                    diff = abs(est.value - ref.value)
                    noise = stderr_multiple * float(np.hypot(est.error, ref.error)) if est.error_kind == "stderr" else 0
                    changes[m.name] = _worst([changes[m.name], _relative(diff, ref.value)])
                    beyond[m.name] = _worst([beyond[m.name], _relative(max(diff - noise, 0.0), ref.value)])
                    if symmetry == "layer_T_alpha":
                        audit.t_alpha_ratios.setdefault(m.name, []).append(est.value / ref.value)
        audit.audited[symmetry] = list(changes)
        for name in changes:
            audit.change.setdefault(name, {})[symmetry] = changes[name]
            audit.beyond_noise.setdefault(name, {})[symmetry] = beyond[name]
    return audit
