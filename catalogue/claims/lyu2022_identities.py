"""Lyu, Li, Arora 2022: the exact identities behind the dynamics, checked to float64 round-off.

Scale invariance of a loss behind BatchNorm (L(cw) = L(w) and its consequences for ∇L and ∇²L),
and Lemma 3.1 (GD+WD, seen on the unit sphere, is projected GD with the effective learning rate
η̃_t = η/((1−ηλ)‖w_t‖²)), step by step.
"""

from __future__ import annotations

import torch
from pydantic import Field

from catalogue.claim import ClaimContext, Control, Outcome
from catalogue.claims.lyu2022 import _source
from catalogue.registry import register
from catalogue.rules import AllOf, AtMost, param
from catalogue.verdicts import worst
from constructions import bn_dynamics
from constructions.bn_regression import build_bn_regression
from constructions.nets import mlp
from constructions.specs import (
    BNLinearRegressionSpec,
    Grid,
    NonNegativeFloat,
    PositiveFloat,
    PositiveInt,
    Spec,
)
from evaluators import Objective

_EXACT = (
    "an exact identity: what remains is float64 round-off (≈ 1e-16 per operation, ×1/c² for the Hessian at the "
    "smallest scale); above {refuted} no round-off explains it"
)


class ScaleInvarianceParams(Spec):
    """A BN linear regression and a two-layer net with BatchNorm, probed at random w."""

    scenario: BNLinearRegressionSpec = BNLinearRegressionSpec(n=8, d=10)
    bn_net_width: PositiveInt = 6
    bn_net_inputs: PositiveInt = 3
    bn_net_samples: PositiveInt = 10
    scales: Grid = (0.01, 0.5, 3.0, 100.0)
    points: PositiveInt = 2
    tolerance: PositiveFloat = 1e-10
    normalized: bool = Field(default=True, description="BatchNorm in the two-layer net (False: the control)")


@register(
    id="lyu2022.scale-invariance-identities",
    kind="identity",
    title="Scale-invariant losses: L(cw) = L(w), ⟨∇L, w⟩ = 0, ∇L(cw) = ∇L/c, ∇²L(cw) = ∇²L/c²",
    statement=(
        "For weights followed by BatchNorm, the training loss is invariant to scaling them, its "
        "gradient is orthogonal to them and scales as 1/c, and its Hessian scales as 1/c²."
    ),
    source=_source("§3 (scale invariance), Lemma 3.1 preliminaries"),
    source_verdict="holds",
    params=ScaleInvarianceParams,
    controls=(
        Control(
            name="no-batchnorm",
            breaks="the two-layer net without BatchNorm: its first layer is not scale-invariant",
            expect="refuted",
            changes={"normalized": False},
        ),
    ),
    rule=AtMost("max_relative_violation", param("tolerance"), 1e-6, why=_EXACT.format(refuted="1e-6")),
    quick={},
    full={
        "scenario": {"n": 20, "d": 100},
        "bn_net_width": 16,
        "bn_net_inputs": 5,
        "bn_net_samples": 32,
        "points": 5,
    },
)
def scale_invariance_identities(p: ScaleInvarianceParams, ctx: ClaimContext) -> Outcome:
    problem = build_bn_regression(p.scenario, ctx.generator("bn-data"))
    gen = ctx.generator("probe-points")
    w0 = torch.randn(p.scenario.d, generator=gen, dtype=torch.float64)
    cases = [("bn_linear_regression", Objective(problem.model(w0), (problem.data.x, problem.data.y)), ["w"])]
    net = mlp(p.bn_net_inputs, (p.bn_net_width,), batchnorm=p.normalized, generator=ctx.generator("bn-net"))
    x = torch.randn(p.bn_net_samples, p.bn_net_inputs, generator=gen, dtype=torch.float64)
    y = torch.randn(p.bn_net_samples, generator=gen, dtype=torch.float64)
    name = "two_layer_bn_net" if p.normalized else "two_layer_net_without_bn"
    cases.append((name, Objective(net, (x, y)), ["0.weight", "0.bias"]))
    rows = []
    for name, obj, invariant in cases:
        for point in range(p.points):
            theta = obj.theta + 0.5 * torch.randn(obj.num_params, generator=gen, dtype=torch.float64) * point
            rows += [
                {"model": name, "point": point, "c": c, **bn_dynamics.scale_invariance_errors(obj, invariant, theta, c)}
                for c in p.scales
            ]
    keys = ("loss", "euler", "gradient", "hessian")
    worst_by = {f"{m}.{k}": worst([r[k] for r in rows if r["model"] == m]) for m, _, _ in cases for k in keys}
    return Outcome(
        evidence={
            "max_relative_violation": worst(worst_by.values()),
            **{f"max_rel_err.{k}": v for k, v in worst_by.items()},
        },
        tables=[
            {
                "name": "relative violation per point and scale",
                "headers": ["model", "point", "c", "loss", "⟨∇L,w⟩", "∇L(cw)", "∇²L(cw)"],
                "rows": [[r["model"], r["point"], r["c"], *(f"{r[k]:.1e}" for k in keys)] for r in rows],
            }
        ],
    )


_STEP = (
    "Lemma 3.1 is exact algebra for one step, checked step by step: each error is one step's float64 round-off "
    "(≈ 1e-15); an error above 1e-8 is a wrong formula, not round-off"
)


class EffectiveLRParams(Spec):
    """GD+WD on the BN linear regression, checked step by step against Lemma 3.1."""

    scenario: BNLinearRegressionSpec = BNLinearRegressionSpec(n=10, d=30)
    lr: PositiveFloat = 0.1
    weight_decay: NonNegativeFloat = 0.01
    steps: PositiveInt = 200
    tolerance: PositiveFloat = 1e-12
    normalized: bool = Field(default=True, description="the BN loss (False: plain least squares, the control)")


@register(
    id="lyu2022.effective-lr-identity",
    kind="identity",
    title="One GD+WD step on a scale-invariant loss is a projected step with η̃ = η/((1−ηλ)‖w‖²)",
    statement=(
        "For a scale-invariant loss, GD with weight decay satisfies w̄_{t+1} = Π(w̄_t − η̃_t ∇L(w̄_t)) with "
        "η̃_t = η/((1−ηλ)‖w_t‖²) and ‖w_{t+1}‖² = (1−ηλ)²‖w_t‖² + η²‖∇L(w_t)‖²."
    ),
    source=_source("Lemma 3.1"),
    source_verdict="holds",
    params=EffectiveLRParams,
    controls=(
        Control(
            name="not-scale-invariant",
            breaks="the same steps on plain least squares (no BatchNorm): ⟨∇L(w), w⟩ ≠ 0 and ∇L(cw) ≠ ∇L(w)/c",
            expect="refuted",
            changes={"normalized": False},
        ),
    ),
    rule=AllOf(
        AtMost("max_rel_err_direction", param("tolerance"), 1e-8, why=_STEP),
        AtMost("max_rel_err_norm_recursion", param("tolerance"), 1e-8, why=_STEP),
    ),
    quick={},
    full={"scenario": {"n": 20, "d": 100}, "steps": 2000},
)
def effective_lr_identity(p: EffectiveLRParams, ctx: ClaimContext) -> Outcome:
    problem = build_bn_regression(p.scenario, ctx.generator("bn-data"))
    loss_and_grad = problem.loss_and_grad if p.normalized else bn_dynamics.plain_least_squares(problem)
    w = torch.randn(p.scenario.d, generator=ctx.generator("init"), dtype=torch.float64)
    errors = bn_dynamics.effective_lr_errors(loss_and_grad, w, p.lr, p.weight_decay, p.steps)
    return Outcome(
        evidence={
            "max_rel_err_direction": worst(errors["direction"]),
            "max_rel_err_norm_recursion": worst(errors["norm_recursion"]),
            "steps_checked": p.steps,
            "final_loss": float(loss_and_grad(errors["w"])[0]),
            "final_norm": float(errors["w"].norm()),
        },
    )
