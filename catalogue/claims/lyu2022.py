"""Lyu, Li, Arora 2022: BatchNorm + weight decay, effective learning rate and sharpness reduction."""

from __future__ import annotations

import torch

from catalogue.claim import ClaimContext, Outcome, Source
from catalogue.registry import register
from constructions.bn_regression import build_bn_regression
from constructions.nets import mlp
from constructions.specs import BNLinearRegressionSpec, NonNegativeFloat, PositiveFloat, PositiveInt, Spec
from evaluators import Objective

PAPER = "Lyu, Li, Arora, Understanding the Generalization Benefit of Normalization Layers: Sharpness Reduction (NeurIPS 2022)"
ARXIV = "2206.07085"
SEED_DOC = "000_09c54c206038e4a2.txt"


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    """‖a − b‖ / ‖b‖ (Frobenius), 0 when both vanish."""
    denom = float(b.norm())
    diff = float((a - b).norm())
    return diff / denom if denom > 0 else diff


def _verdict(worst: float, holds_below: float, refuted_above: float) -> str:
    if worst <= holds_below:
        return "holds"
    return "refuted" if worst > refuted_above else "inconclusive"


class ScaleInvarianceParams(Spec):
    """A BN linear regression and a two-layer net with BatchNorm, probed at random w."""

    scenario: BNLinearRegressionSpec = BNLinearRegressionSpec(n=8, d=10)
    bn_net_width: PositiveInt = 6
    bn_net_inputs: PositiveInt = 3
    bn_net_samples: PositiveInt = 10
    scales: tuple[PositiveFloat, ...] = (0.01, 0.5, 3.0, 100.0)
    points: PositiveInt = 2
    tolerance: PositiveFloat = 1e-10


def _identity_errors(obj: Objective, invariant: list[str], theta: torch.Tensor, c: float) -> dict[str, float]:
    """Relative violations of the four identities for scaling the ``invariant`` parameters by c."""
    idx = torch.cat([torch.arange(obj.num_params)[obj.param_slice(n)] for n in invariant])
    scaled = theta.clone()
    scaled[idx] *= c
    loss, grad = obj.loss_and_grad(theta)
    loss_c, grad_c = obj.loss_and_grad(scaled)
    h, h_c = obj.hessian(theta)[idx][:, idx], obj.hessian(scaled)[idx][:, idx]
    w = theta[idx]
    return {
        "loss": abs(loss_c - loss) / abs(loss),
        "euler": abs(float(grad[idx] @ w)) / (float(grad[idx].norm() * w.norm())),
        "gradient": _rel(grad_c[idx], grad[idx] / c),
        "hessian": _rel(h_c, h / c**2),
    }


@register(
    id="lyu2022.scale-invariance-identities",
    title="Scale-invariant losses: L(cw) = L(w), ⟨∇L, w⟩ = 0, ∇L(cw) = ∇L/c, ∇²L(cw) = ∇²L/c²",
    statement=(
        "For weights followed by BatchNorm, the training loss is invariant to scaling them, its "
        "gradient is orthogonal to them and scales as 1/c, and its Hessian scales as 1/c²."
    ),
    source=Source(paper=PAPER, arxiv=ARXIV, locator="§3 (scale invariance), Lemma 3.1 preliminaries", seed=SEED_DOC),
    source_verdict="holds",
    params=ScaleInvarianceParams,
    quick={},
    full={"scenario": {"n": 20, "d": 100}, "bn_net_width": 16, "bn_net_inputs": 5, "bn_net_samples": 32, "points": 5},
)
def scale_invariance_identities(p: ScaleInvarianceParams, ctx: ClaimContext) -> Outcome:
    problem = build_bn_regression(p.scenario, ctx.generator("bn-data"))
    gen = ctx.generator("probe-points")
    cases = []
    w0 = torch.randn(p.scenario.d, generator=gen, dtype=torch.float64)
    lin = Objective(problem.model(w0), problem.data.x, problem.data.y)
    cases.append(("bn_linear_regression", lin, ["w"]))
    net = mlp(p.bn_net_inputs, (p.bn_net_width,), batchnorm=True, generator=ctx.generator("bn-net"))
    x = torch.randn(p.bn_net_samples, p.bn_net_inputs, generator=gen, dtype=torch.float64)
    y = torch.randn(p.bn_net_samples, generator=gen, dtype=torch.float64)
    cases.append(("two_layer_bn_net", Objective(net, x, y), ["0.weight", "0.bias"]))
    worst: dict[str, float] = {}
    rows = []
    for name, obj, invariant in cases:
        for point in range(p.points):
            theta = obj.theta + 0.5 * torch.randn(obj.num_params, generator=gen, dtype=torch.float64) * point
            for c in p.scales:
                errs = _identity_errors(obj, invariant, theta, c)
                rows.append([name, point, c, *(f"{errs[k]:.1e}" for k in ("loss", "euler", "gradient", "hessian"))])
                for key, value in errs.items():
                    worst[f"{name}.{key}"] = max(worst.get(f"{name}.{key}", 0.0), value)
    overall = max(worst.values())
    return Outcome(
        verdict=_verdict(overall, p.tolerance, 1e-6),
        evidence={"max_relative_violation": overall, **{f"max_rel_err.{k}": v for k, v in worst.items()}},
        thresholds={"holds_if_max_rel_err_at_most": p.tolerance, "refuted_if_above": 1e-6},
        tables=[{
            "name": "relative violation per point and scale",
            "headers": ["model", "point", "c", "loss", "⟨∇L,w⟩", "∇L(cw)", "∇²L(cw)"],
            "rows": rows,
        }],
    )


class EffectiveLRParams(Spec):
    """GD+WD on the BN linear regression, checked step by step against Lemma 3.1."""

    scenario: BNLinearRegressionSpec = BNLinearRegressionSpec(n=10, d=30)
    lr: PositiveFloat = 0.1
    weight_decay: NonNegativeFloat = 0.01
    steps: PositiveInt = 200
    tolerance: PositiveFloat = 1e-12


@register(
    id="lyu2022.effective-lr-identity",
    title="One GD+WD step on a scale-invariant loss is a projected step with η̃ = η/((1−ηλ)‖w‖²)",
    statement=(
        "For a scale-invariant loss, GD with weight decay satisfies w̄_{t+1} = Π(w̄_t − η̃_t ∇L(w̄_t)) with "
        "η̃_t = η/((1−ηλ)‖w_t‖²) and ‖w_{t+1}‖² = (1−ηλ)²‖w_t‖² + η²‖∇L(w_t)‖²."
    ),
    source=Source(paper=PAPER, arxiv=ARXIV, locator="Lemma 3.1", seed=SEED_DOC),
    source_verdict="holds",
    params=EffectiveLRParams,
    quick={},
    full={"scenario": {"n": 20, "d": 100}, "steps": 2000},
)
def effective_lr_identity(p: EffectiveLRParams, ctx: ClaimContext) -> Outcome:
    problem = build_bn_regression(p.scenario, ctx.generator("bn-data"))
    w = torch.randn(p.scenario.d, generator=ctx.generator("init"), dtype=torch.float64)
    eta, lam = p.lr, p.weight_decay
    worst_dir, worst_norm = 0.0, 0.0
    for _ in range(p.steps):
        _, g = problem.loss_and_grad(w)
        w_next = (1 - eta * lam) * w - eta * g
        norm = w.norm()
        w_bar = w / norm
        _, g_bar = problem.loss_and_grad(w_bar)
        eta_eff = eta / ((1 - eta * lam) * norm**2)
        step = w_bar - eta_eff * g_bar
        worst_dir = max(worst_dir, _rel(w_next / w_next.norm(), step / step.norm()))
        predicted = (1 - eta * lam) ** 2 * norm**2 + eta**2 * g.norm() ** 2
        worst_norm = max(worst_norm, abs(float(w_next.norm() ** 2 - predicted)) / float(predicted))
        w = w_next
    overall = max(worst_dir, worst_norm)
    return Outcome(
        verdict=_verdict(overall, p.tolerance, 1e-8),
        evidence={
            "max_rel_err_direction": worst_dir,
            "max_rel_err_norm_recursion": worst_norm,
            "steps_checked": p.steps,
            "final_loss": float(problem.loss(w)),
            "final_norm": float(w.norm()),
        },
        thresholds={"holds_if_max_rel_err_at_most": p.tolerance, "refuted_if_above": 1e-8},
    )
