"""Lyu, Li, Arora 2022: BatchNorm + weight decay, effective learning rate and sharpness reduction."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import numpy as np
import torch
from pydantic import Field

from catalogue.claim import ClaimContext, Control, Figure, Outcome, Series, Source
from catalogue.registry import register
from catalogue.rules import AllOf, AtLeast, AtMost, Between, Given, IsTrue, measured, param
from catalogue.verdicts import worst
from constructions import symmetries
from constructions.bn_regression import (
    build_bn_regression,
    cosine_to_min_norm,
    gradient_descent,
    gradient_flow,
    spherical_sharpness,
)
from constructions.mlp_regression import build_mlp_regression
from constructions.nets import mlp
from constructions.specs import (
    BNLinearRegressionSpec,
    Grid,
    MLPRegressionSpec,
    NonNegativeFloat,
    PositiveFloat,
    PositiveInt,
    Spec,
)
from constructions.training import gd_weight_decay_scale_invariant
from evaluators import Objective

PAPER = (
    "Lyu, Li, Arora, Understanding the Generalization Benefit of Normalization Layers: "
    "Sharpness Reduction (NeurIPS 2022)"
)
ARXIV = "2206.07085"
SEED_DOC = "000_09c54c206038e4a2.txt"
_source = Source.citing(PAPER, ARXIV, SEED_DOC)


_EXACT = (
    "an exact identity: what remains is float64 round-off (≈ 1e-16 per operation, ×1/c² for the Hessian at the "
    "smallest scale); above {refuted} no round-off explains it"
)


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    """‖a − b‖ / ‖b‖ (Frobenius), 0 when both vanish."""
    denom = float(b.norm())
    diff = float((a - b).norm())
    return diff / denom if denom > 0 else diff


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
    cases = []
    w0 = torch.randn(p.scenario.d, generator=gen, dtype=torch.float64)
    lin = Objective(problem.model(w0), problem.data.x, problem.data.y)
    cases.append(("bn_linear_regression", lin, ["w"]))
    net = mlp(p.bn_net_inputs, (p.bn_net_width,), batchnorm=p.normalized, generator=ctx.generator("bn-net"))
    x = torch.randn(p.bn_net_samples, p.bn_net_inputs, generator=gen, dtype=torch.float64)
    y = torch.randn(p.bn_net_samples, generator=gen, dtype=torch.float64)
    name = "two_layer_bn_net" if p.normalized else "two_layer_net_without_bn"
    cases.append((name, Objective(net, x, y), ["0.weight", "0.bias"]))
    errors: dict[str, list[float]] = {}
    rows = []
    for name, obj, invariant in cases:
        for point in range(p.points):
            theta = obj.theta + 0.5 * torch.randn(obj.num_params, generator=gen, dtype=torch.float64) * point
            for c in p.scales:
                errs = _identity_errors(obj, invariant, theta, c)
                rows.append(
                    [
                        name,
                        point,
                        c,
                        *(f"{errs[k]:.1e}" for k in ("loss", "euler", "gradient", "hessian")),
                    ]
                )
                for key, value in errs.items():
                    errors.setdefault(f"{name}.{key}", []).append(value)
    worst_by = {k: worst(v) for k, v in errors.items()}
    return Outcome(
        evidence={
            "max_relative_violation": worst(worst_by.values()),
            **{f"max_rel_err.{k}": v for k, v in worst_by.items()},
        },
        tables=[
            {
                "name": "relative violation per point and scale",
                "headers": ["model", "point", "c", "loss", "⟨∇L,w⟩", "∇L(cw)", "∇²L(cw)"],
                "rows": rows,
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


def _plain_least_squares(problem) -> Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    """L(w) = mean((xᵀw + β − y)²) on the same data: no normalization, so not scale-invariant."""
    x, y = problem.data.x, problem.data.y

    def loss_and_grad(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        r = x @ w + problem.beta - y
        return (r**2).mean(), 2 * x.T @ r / len(y)

    return loss_and_grad


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
    loss_and_grad = problem.loss_and_grad if p.normalized else _plain_least_squares(problem)
    w = torch.randn(p.scenario.d, generator=ctx.generator("init"), dtype=torch.float64)
    eta, lam = p.lr, p.weight_decay
    dir_errs, norm_errs = [], []
    for _ in range(p.steps):
        _, g = loss_and_grad(w)
        w_next = (1 - eta * lam) * w - eta * g
        norm = w.norm()
        w_bar = w / norm
        _, g_bar = loss_and_grad(w_bar)
        eta_eff = eta / ((1 - eta * lam) * norm**2)
        step = w_bar - eta_eff * g_bar
        dir_errs.append(_rel(w_next / w_next.norm(), step / step.norm()))
        predicted = (1 - eta * lam) ** 2 * norm**2 + eta**2 * g.norm() ** 2
        norm_errs.append(abs(float(w_next.norm() ** 2 - predicted)) / float(predicted))
        w = w_next
    return Outcome(
        evidence={
            "max_rel_err_direction": worst(dir_errs),
            "max_rel_err_norm_recursion": worst(norm_errs),
            "steps_checked": p.steps,
            "final_loss": float(loss_and_grad(w)[0]),
            "final_norm": float(w.norm()),
        },
    )


# =========================================================================== training dynamics
class DynamicsParams(Spec):
    """GD+WD on the BN linear regression from random inits; step counts in units of 1/(ηλ)."""

    scenarios: tuple[BNLinearRegressionSpec, ...] = Field(default=(BNLinearRegressionSpec(n=20, d=100),), min_length=1)
    data_seeds: PositiveInt = Field(default=1, description="data draws per scenario")
    inits: PositiveInt = 3
    lr: PositiveFloat = 0.1
    weight_decay: PositiveFloat = 0.01
    horizon: PositiveFloat = Field(default=20.0, description="steps = horizon / (η λ)")
    log_points: PositiveInt = 80


# The dynamics claims share their sizes: quick runs in seconds, full has several seeds and inits.
QUICK = {"scenarios": [{"n": 12, "d": 40}], "horizon": 12.0}
FULL = {"scenarios": [{"n": 32, "d": 160}], "data_seeds": 2, "inits": 4, "horizon": 40.0, "log_points": 200}


SHORT_HORIZON = Control(
    name="short-horizon",
    breaks="GD+WD stopped after 0.5/(ηλ) steps, before the Θ(1/(ηλ)) time Lyu et al. need to reach the regime",
    expect="refuted",
    changes={"horizon": 0.5},
)


def _problems(p: DynamicsParams, ctx: ClaimContext):
    """(problem, inits) per scenario and data seed."""
    for j, spec in enumerate(p.scenarios):
        for s in range(p.data_seeds):
            rep = j * p.data_seeds + s
            problem = build_bn_regression(spec, ctx.generator("bn-data", rep))
            w0 = torch.randn(p.inits, spec.d, generator=ctx.generator("inits", rep), dtype=torch.float64)
            yield problem, w0


def _gd(problem, w0, p: DynamicsParams, lr: float | None = None, weight_decay: float | None = None):
    lr = p.lr if lr is None else lr
    wd = p.weight_decay if weight_decay is None else weight_decay
    steps = int(round(p.horizon / (lr * p.weight_decay)))
    return gradient_descent(problem, w0, lr=lr, weight_decay=wd, steps=steps, log_every=max(1, steps // p.log_points))


def _cycle_midpoint(problem, w: torch.Tensor, lr: float, weight_decay: float) -> torch.Tensor:
    """The midpoint of the directions of w and its next GD+WD iterate (rows).

    At the Edge of Stability the iterates 2-cycle across the interpolating manifold; the limit the
    theory speaks of is the manifold point between them, not either end of the cycle.
    """
    _, g = problem.loss_and_grad(w)
    w_next = (1 - lr * weight_decay) * w - lr * g
    return w / w.norm(dim=1, keepdim=True) + w_next / w_next.norm(dim=1, keepdim=True)


def _curve_figure(name, title, ylabel, traj, values, *, reference=None, logy=False, label="run"):
    series = [
        Series(label=f"{label} {i}", x=traj.steps.tolist(), y=values[:, i].tolist()) for i in range(values.shape[1])
    ]
    if reference is not None:
        series.append(Series(label=reference[0], y=[reference[1]], style="hline"))
    return Figure(name=name, title=title, xlabel="step", ylabel=ylabel, series=series, logy=logy)


_STARTS = "the statement: η̃λ1 starts below 1, in the stable regime far from the edge"
_BAND = (
    "Thm 4.4: η̃λ1 → 2; at the edge GD moves in a 2-cycle, so the mean over the trailing window (of every run) may "
    "sit within ±10% of 2"
)


class EoSParams(DynamicsParams):
    window: PositiveFloat = Field(default=0.25, le=1, description="trailing fraction of the logs averaged")
    band: tuple[PositiveFloat, PositiveFloat] = (1.8, 2.2)
    bn_net: MLPRegressionSpec = Field(
        default=MLPRegressionSpec(n=16, d=5, hidden=(64,), batchnorm=True, noise=0.1),
        description="over-parameterized so the loss can get small, as the theorem's phase needs",
    )
    bn_net_lr: PositiveFloat = 0.05
    bn_net_weight_decay: PositiveFloat = 0.05
    bn_net_steps: PositiveInt = 4000
    bn_net_init_scale: PositiveFloat = Field(
        default=2.0,
        description="initial ×c of the scale-invariant weights: same function, η̃ smaller by c²",
    )


@register(
    id="lyu2022.enters-edge-of-stability",
    kind="empirical",
    seeds=5,
    title="GD+WD on a scale-invariant loss reaches the Edge of Stability: η̃_t·λ1(∇²L(w̄_t)) → 2",
    statement=(
        "With BatchNorm and weight decay, η̃_t·λ1(∇²L(w̄_t)) starts below 1 and, once the loss is small, rises to "
        "and stays near 2 (the Edge of Stability)."
    ),
    source=_source("Theorem 4.4 and §4.1 (η̃_t rises until 2/η̃_t meets the spherical sharpness; cf. Figure 2c)"),
    source_verdict="holds",
    params=EoSParams,
    controls=(SHORT_HORIZON,),
    rule=AllOf(
        AtMost("linear_initial_eos_max", 1, strict=True, why=_STARTS),
        Between("linear_trailing_eos_min", param("band.0"), param("band.1"), why=_BAND),
        Between("linear_trailing_eos_max", param("band.0"), param("band.1"), why=_BAND),
        AtMost("bn_net_initial_eos", 1, strict=True, why=_STARTS),
        Between("bn_net_trailing_eos", param("band.0"), param("band.1"), why=_BAND),
    ),
    quick={**QUICK, "log_points": 60},
    expected_failure={
        "quick": "quick mode's ReLU BN net (η = λ = 0.05) oscillates chaotically past the Edge of Stability: its "
        "trailing η̃λ1 is 2.20 on the pinned AVX2 kernels (2.36 before; the trajectory follows the reduction order), "
        "just above the band (1.8, 2.2), while the linear BN regression sits at 2.00",
        "full": "seed-dependent: full mode (η = λ = 0.02) over 5 seeds has the linear BN regression trailing at 2.00 "
        "for every seed, the ReLU BN net at 2.10, 2.01, 1.68, 2.14 and 2.19 (seed 2 below the band (1.8, 2.2))",
    },
    full={
        **FULL,
        "bn_net_lr": 0.02,
        "bn_net_weight_decay": 0.02,
        "bn_net_steps": 20000,
        "bn_net_init_scale": 4.0,
    },
)
def enters_edge_of_stability(p: EoSParams, ctx: ClaimContext) -> Outcome:
    starts, trailing, figures = [], [], []
    for s, (problem, w0) in enumerate(_problems(p, ctx)):
        traj = _gd(problem, w0, p)
        tail = max(1, int(len(traj.steps) * p.window))
        starts += traj.eos[0].tolist()
        trailing += traj.eos[-tail:].mean(axis=0).tolist()
        if s == 0:
            figures.append(
                _curve_figure(
                    "eos-linear",
                    "BN linear regression: η̃_t · λ1(∇²L(w̄_t))",
                    "η̃ λ1",
                    traj,
                    traj.eos,
                    reference=("2", 2.0),
                    label="init",
                )
            )
            figures.append(
                _curve_figure(
                    "sharpness-linear",
                    "BN linear regression: spherical sharpness",
                    "λ1(∇²L(w̄))",
                    traj,
                    traj.sharpness,
                    label="init",
                )
            )
    problem = build_mlp_regression(p.bn_net, ctx.generator("bn-net"))
    net = symmetries.scale_before_normalization(problem.model, 0, p.bn_net_init_scale)
    obj = Objective(net, problem.data.x, problem.data.y)
    run = gd_weight_decay_scale_invariant(
        obj,
        ["0.weight", "0.bias"],
        lr=p.bn_net_lr,
        weight_decay=p.bn_net_weight_decay,
        steps=p.bn_net_steps,
        log_every=max(1, p.bn_net_steps // p.log_points),
    )
    tail = max(1, int(len(run.steps) * p.window))
    net_start, net_trailing = float(run.eos[0]), float(run.eos[-tail:].mean())
    figures.append(
        Figure(
            name="eos-bn-net",
            title="Two-layer net with BatchNorm: η̃_t · λ1 (first layer, output fixed)",
            xlabel="step",
            ylabel="η̃ λ1",
            series=[
                Series(label="η̃ λ1", x=run.steps.tolist(), y=run.eos.tolist()),
                Series(label="2", y=[2.0], style="hline"),
            ],
        )
    )
    return Outcome(
        evidence={
            "linear_initial_eos_max": max(starts),
            "linear_trailing_eos": trailing,
            "linear_trailing_eos_min": min(trailing),
            "linear_trailing_eos_max": max(trailing),
            "bn_net_initial_eos": net_start,
            "bn_net_trailing_eos": net_trailing,
            "bn_net_final_loss": float(run.loss[-1]),
            "steps_linear": int(round(p.horizon / (p.lr * p.weight_decay))),
        },
        thresholds={"trailing_window_fraction": p.window},
        figures=figures,
        notes=(
            "The BN-net variant trains only the weights feeding the BatchNorm (the output layer is fixed), so every "
            "trained parameter is scale-invariant, as the theorem assumes."
        ),
    )


class ReductionParams(DynamicsParams):
    tolerance: PositiveFloat = 0.01


def _interpolant_sharpness(problem, gen: torch.Generator, samples: int) -> tuple[float, float]:
    """Spherical sharpness at the min-norm interpolant's direction, and the least found at random interpolants."""
    w_mn, _ = problem.min_norm_interpolant()
    s_min = float(spherical_sharpness(problem, w_mn[None])[0])
    xc = problem.data.x - problem.data.x.mean(0)
    null = torch.eye(len(w_mn), dtype=torch.float64) - torch.linalg.pinv(xc) @ xc
    scales = torch.logspace(-2, 1, samples, dtype=torch.float64)[:, None] * w_mn.norm()
    others = w_mn + scales * (torch.randn(samples, len(w_mn), generator=gen, dtype=torch.float64) @ null)
    return s_min, float(spherical_sharpness(problem, others).min())


@register(
    id="lyu2022.sharpness-reduction",
    kind="empirical",
    seeds=5,
    title="At the Edge of Stability GD+WD reduces spherical sharpness to its minimum over interpolants",
    statement=(
        "In the Edge-of-Stability phase, the spherical sharpness of GD+WD decreases to the minimum spherical "
        "sharpness over the interpolating manifold."
    ),
    source=_source("Theorem 4.7"),
    source_verdict="holds",
    params=ReductionParams,
    controls=(SHORT_HORIZON,),
    rule=AllOf(
        IsTrue("all_runs_reached_eos", why="Thm 4.7 is about the Edge-of-Stability phase: every run must enter it"),
        IsTrue(
            "all_window_trends_decreasing",
            why="'decreases': after entry, the means of four windows never rise by more than the tolerance (the "
            "2-cycle's wobble)",
        ),
        AtMost(
            "max_rel_gap_to_minimum",
            param("tolerance"),
            why="'to its minimum': the 2-cycle midpoint at the horizon within 1% of the minimum; the spread of "
            "sharpness over interpolants is orders of magnitude larger",
        ),
        IsTrue(
            "minimum_unbeaten_by_random_interpolants",
            why="the reference minimum (the min-norm direction) must not be beaten by any of 64 random interpolants",
        ),
    ),
    quick=QUICK,
    full=FULL,
)
def sharpness_reduction(p: ReductionParams, ctx: ClaimContext) -> Outcome:
    rows, reached, unbeaten, gaps, figures = [], [], [], [], []
    for s, (problem, w0) in enumerate(_problems(p, ctx)):
        traj = _gd(problem, w0, p)
        s_min, s_random = _interpolant_sharpness(problem, ctx.generator("interpolants", s), 64)
        entered = np.argmax(traj.eos >= 1.8, axis=0)  # first log at the edge, per run
        mid_sharpness = spherical_sharpness(problem, _cycle_midpoint(problem, traj.w, p.lr, p.weight_decay)).numpy()
        for i in range(w0.shape[0]):
            at_entry = traj.sharpness[entered[i], i]
            final = float(mid_sharpness[i])
            windows = traj.sharpness[entered[i] :, i]
            windows = [w.mean() for w in np.array_split(windows, 4) if len(w)]
            trend = all(b <= a * (1 + p.tolerance) for a, b in zip(windows, windows[1:], strict=False))
            rel = abs(final - s_min) / s_min
            reached.append(bool(traj.eos[:, i].max() >= 1.8))
            unbeaten.append(bool(s_random >= s_min * (1 - 1e-9)))
            gaps.append(rel)
            rows.append(
                [
                    s,
                    i,
                    f"{traj.sharpness[0, i]:.4g}",
                    f"{at_entry:.4g}",
                    f"{final:.4g}",
                    f"{s_min:.4g}",
                    f"{rel:.1e}",
                    trend,
                    f"{s_random:.4g}",
                ]
            )
        if s == 0:
            figures.append(
                _curve_figure(
                    "spherical",
                    "Spherical sharpness under GD+WD vs its minimum over interpolants",
                    "λ1(∇²L(w̄))",
                    traj,
                    traj.sharpness,
                    reference=("min over interpolants", s_min),
                    logy=True,
                    label="init",
                )
            )
    return Outcome(
        evidence={
            "runs": len(rows),
            "max_rel_gap_to_minimum": max(gaps),
            "all_window_trends_decreasing": all(r[7] for r in rows),
            "all_runs_reached_eos": all(reached),
            "minimum_unbeaten_by_random_interpolants": all(unbeaten),
        },
        thresholds={
            "entry": "first log with η̃λ1 ≥ 1.8",
            "final": "λ1 at the midpoint of the last 2-cycle's directions",
            "trend": "means of 4 windows after entry non-increasing (slack: the tolerance, for the 2-cycle)",
            "minimum": "λ1 at the min-norm interpolant's direction; checked ≤ 64 random interpolants",
        },
        tables=[
            {
                "name": "spherical sharpness: start, EoS entry, end, and the minimum over interpolants",
                "headers": [
                    "data seed",
                    "init",
                    "start",
                    "at EoS entry",
                    "final (2-cycle midpoint)",
                    "min (min-norm dir.)",
                    "rel. gap",
                    "decreasing",
                    "least at random interpolants",
                ],
                "rows": rows,
            }
        ],
        figures=figures,
    )


class MinNormParams(DynamicsParams):
    cos_at_least: PositiveFloat = 0.999
    norm_ratio_tolerance: PositiveFloat = 0.01


def _final_alignment(problem, w: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    w_mn, _ = problem.min_norm_interpolant()
    w_t, _ = problem.equivalent_linear(w)
    return cosine_to_min_norm(problem, w).numpy(), (w_t.norm(dim=-1) / w_mn.norm()).numpy()


@register(
    id="lyu2022.bn-regression-min-norm",
    kind="empirical",
    seeds=5,
    title="GD+WD on BN linear regression converges to the min-norm interpolant from any init",
    statement=(
        "For linear regression through BatchNorm, GD+WD's limit has equivalent linear weights w̃ aligned with the "
        "min-norm interpolant (cos ≥ 0.999) and of the same norm (within 1%), for every seed and initialization."
    ),
    source=_source("Theorem 5.1"),
    source_verdict="holds",
    params=MinNormParams,
    controls=(SHORT_HORIZON,),
    rule=AllOf(
        AtLeast("min_final_cos", param("cos_at_least"), why="Thm 5.1's limit, in the statement's numbers: cos ≥ 0.999"),
        AtMost(
            "max_norm_ratio_error",
            param("norm_ratio_tolerance"),
            why="Thm 5.1's limit, in the statement's numbers: ‖w̃‖ within 1% of the min-norm interpolant's",
        ),
    ),
    quick={**QUICK, "inits": 3},
    full={
        "scenarios": [{"n": 32, "d": 160}, {"n": 32, "d": 160, "inputs": "anisotropic"}],
        "data_seeds": 2,
        "inits": 5,
        "horizon": 40.0,
        "log_points": 100,
    },
)
def bn_regression_min_norm(p: MinNormParams, ctx: ClaimContext) -> Outcome:
    cos_all, ratio_all, initial = [], [], []
    for problem, w0 in _problems(p, ctx):
        traj = _gd(problem, w0, p)
        cos, ratio = _final_alignment(problem, _cycle_midpoint(problem, traj.w, p.lr, p.weight_decay))
        cos_all += cos.tolist()
        ratio_all += ratio.tolist()
        initial += traj.cos[0].tolist()
    return Outcome(
        evidence={
            "min_final_cos": min(cos_all),
            "max_norm_ratio_error": max(abs(r - 1) for r in ratio_all),
            "initial_cos": initial,
            "final_cos": cos_all,
            "norm_ratio": ratio_all,
        },
        thresholds={"limit": "midpoint of the final Edge-of-Stability 2-cycle"},
    )


_NOT_MIN_NORM = "the statement's number: from random inits these limits stay away from the min-norm one (cos < 0.99)"


class FlowParams(DynamicsParams):
    flow_time: PositiveFloat = Field(
        default=600.0, description="t_end of gradient flow with WD (‖w‖ shrinks as e^{−λt})"
    )
    cos_below: PositiveFloat = 0.99
    init: Literal["random", "min-norm"] = Field(
        default="random", description="random inits, or every init along the min-norm interpolant (the control)"
    )


@register(
    id="lyu2022.flow-does-not",
    kind="empirical",
    seeds=5,
    title="Gradient flow with WD and GD without WD stop at an init-dependent interpolant",
    statement=(
        "Gradient flow with weight decay, and GD without weight decay, converge to interpolants that depend on the "
        "initialization and are not the min-norm one (cos < 0.99 for random inits)."
    ),
    source=_source("§5, discussion after Theorem 5.1"),
    source_verdict="holds",
    params=FlowParams,
    controls=(
        Control(
            name="min-norm-init",
            breaks="every run starts on the min-norm interpolant's direction, where the loss is already zero: the "
            "limits are the min-norm one",
            expect="refuted",
            changes={"init": "min-norm"},
        ),
    ),
    rule=Given(
        AtMost(
            "max_final_loss",
            1e-8,
            why="the limits must be interpolants (training MSE ≤ 1e-8) before their direction means anything",
        ),
        AllOf(
            AtMost("max_cos_gradient_flow_wd", param("cos_below"), strict=True, why=_NOT_MIN_NORM),
            AtMost("max_cos_gd_no_wd", param("cos_below"), strict=True, why=_NOT_MIN_NORM),
        ),
    ),
    quick={**QUICK, "inits": 2, "flow_time": 400.0},
    full={**FULL, "log_points": 80},
)
def flow_does_not(p: FlowParams, ctx: ClaimContext) -> Outcome:
    rows, gf_cos, nowd_cos, final_losses, norm_law, figures = [], [], [], [], 0.0, []
    for s, (problem, w0) in enumerate(_problems(p, ctx)):
        if p.init == "min-norm":
            w_mn, _ = problem.min_norm_interpolant()
            w0 = w0.norm(dim=1, keepdim=True) * w_mn / w_mn.norm()
        wd = _gd(problem, w0, p)
        nowd = _gd(problem, w0, p, weight_decay=0.0)
        gf = gradient_flow(problem, w0, weight_decay=p.weight_decay, t_end=p.flow_time, n_log=p.log_points // 2)
        expected = w0.norm(dim=1).numpy() * np.exp(-p.weight_decay * p.flow_time)
        norm_law = max(norm_law, float(np.max(np.abs(gf.norm[-1] - expected) / expected)))
        gf_cos += gf.cos[-1].tolist()
        nowd_cos += nowd.cos[-1].tolist()
        final_losses += gf.loss[-1].tolist() + nowd.loss[-1].tolist()
        for i in range(w0.shape[0]):
            rows.append(
                [
                    s,
                    i,
                    f"{wd.cos[0, i]:.4f}",
                    f"{wd.cos[-1, i]:.5f}",
                    f"{nowd.cos[-1, i]:.4f}",
                    f"{gf.cos[-1, i]:.4f}",
                ]
            )
        if s == 0:
            series = []
            for name, traj in (("GD+WD", wd), ("GD, no WD", nowd)):
                series += [
                    Series(label=f"{name} init {i}", x=traj.steps.tolist(), y=traj.cos[:, i].tolist())
                    for i in range(w0.shape[0])
                ]
            figures.append(
                Figure(
                    name="cos",
                    title="cos(w̃_t, w_min-norm): GD+WD vs GD without WD",
                    xlabel="step",
                    ylabel="cosine",
                    series=series,
                )
            )
            figures.append(
                Figure(
                    name="cos-flow",
                    title="cos(w̃_t, w_min-norm) along gradient flow with WD",
                    xlabel="time t",
                    ylabel="cosine",
                    series=[
                        Series(label=f"GF+WD init {i}", x=gf.steps.tolist(), y=gf.cos[:, i].tolist())
                        for i in range(w0.shape[0])
                    ],
                )
            )
    return Outcome(
        evidence={
            "max_cos_gradient_flow_wd": max(gf_cos),
            "max_cos_gd_no_wd": max(nowd_cos),
            "max_final_loss": max(final_losses),
            "gf_norm_law_rel_err": norm_law,
            "spread_of_limits_cos": float(np.std(gf_cos + nowd_cos)),
        },
        thresholds={"gf_solver": "Radau, rtol 1e-10, exact Jacobian"},
        tables=[
            {
                "name": "cos to the min-norm interpolant: init, GD+WD, GD without WD, gradient flow with WD",
                "headers": ["data seed", "init", "cos at init", "GD+WD", "GD no WD", "GF+WD"],
                "rows": rows,
            }
        ],
        figures=figures,
    )


class SmallLRParams(DynamicsParams):
    lrs: Grid = (0.1, 0.03, 0.01)
    cos_at_least: PositiveFloat = 0.99
    spread_at_most: PositiveFloat = 2.0


@register(
    id="lyu2022.any-small-lr",
    kind="empirical",
    seeds=5,
    title="Sharpness reduction happens for any small learning rate (steps ∝ 1/(ηλ))",
    statement=(
        "No matter how small the learning rate, GD+WD on BN linear regression reaches the min-norm direction "
        "(cos ≥ 0.99) within a number of steps proportional to 1/(ηλ), and the scaling is needed: the smallest rate "
        "given the largest rate's step count falls short."
    ),
    source=_source("Theorem 4.7 (any η), §5"),
    source_verdict="holds",
    params=SmallLRParams,
    controls=(SHORT_HORIZON,),
    rule=AllOf(
        AtLeast(
            "min_final_cos",
            param("cos_at_least"),
            why="the statement's number: every learning rate reaches cos ≥ 0.99 within horizon/(ηλ) steps",
        ),
        AtMost(
            "hitting_time_spread",
            param("spread_at_most"),
            why="'proportional to 1/(ηλ)': the rescaled times ηλ·t at which cos ≥ 0.99 agree within 2× over the rates; "
            "a fixed step count would make them differ by the ratio of the rates",
        ),
        AtMost(
            "smallest_lr_cos_at_largest_lr_budget",
            param("cos_at_least"),
            strict=True,
            why="the scaling is needed: the smallest rate given only the largest rate's horizon/(ηλ) steps falls short",
        ),
    ),
    quick={
        "scenarios": [{"n": 12, "d": 40}],
        "horizon": 12.0,
        "inits": 2,
        "lrs": (0.1, 0.03),
        "log_points": 40,
    },
    full={
        "scenarios": [{"n": 32, "d": 160}],
        "inits": 3,
        "horizon": 30.0,
        "lrs": (0.1, 0.03, 0.01),
        "log_points": 60,
    },
)
def any_small_lr(p: SmallLRParams, ctx: ClaimContext) -> Outcome:
    problem, w0 = next(iter(_problems(p, ctx)))
    finals, series, hits = {}, [], {}
    largest_budget = p.horizon / (max(p.lrs) * p.weight_decay)  # steps the largest rate gets
    for lr in sorted(p.lrs, reverse=True):
        traj = _gd(problem, w0, p, lr=lr)
        finals[lr] = traj.cos[-1].tolist()
        reached = np.flatnonzero(traj.cos.min(axis=1) >= p.cos_at_least)
        hits[lr] = float(traj.steps[reached[0]] * lr * p.weight_decay) if len(reached) else None
        within = traj.steps <= largest_budget  # logs inside the largest rate's budget (step 0 always is)
        short = float(traj.cos[within][-1].min())  # ends at the smallest rate
        series.append(
            Series(
                label=f"η = {lr:g}",
                x=(traj.steps * lr * p.weight_decay).tolist(),
                y=traj.cos.min(axis=1).tolist(),
            )
        )
    worst = min(min(v) for v in finals.values())
    spread = max(hits.values()) / min(hits.values()) if None not in hits.values() else None
    return Outcome(
        evidence={
            "min_final_cos": worst,
            "hitting_time_rescaled": {f"{lr:g}": t for lr, t in hits.items()},
            "hitting_time_spread": spread,
            "smallest_lr_cos_at_largest_lr_budget": short,
            **{f"final_cos_lr_{lr:g}": v for lr, v in finals.items()},
            "steps_per_lr": {f"{lr:g}": int(round(p.horizon / (lr * p.weight_decay))) for lr in p.lrs},
        },
        thresholds={"steps": f"{p.horizon:g} / (η λ)"},
        figures=[
            Figure(
                name="cos-vs-time",
                title="Worst cos to the min-norm interpolant vs rescaled time ηλt",
                xlabel="η λ t",
                ylabel="min over inits of cos",
                series=series,
            )
        ],
    )


class NoWDParams(DynamicsParams):
    small_loss: PositiveFloat = 1e-6
    stagnation: PositiveFloat = 0.01
    reduction: PositiveFloat = 0.05
    baseline_weight_decay: NonNegativeFloat = Field(
        default=0.0, description="weight decay of the 'without' arm: 0, or λ itself in the control"
    )


@register(
    id="lyu2022.no-wd-no-reduction",
    kind="empirical",
    seeds=5,
    title="Without weight decay, spherical sharpness stops changing once the loss is small",
    statement=(
        "Without weight decay, GD's spherical sharpness freezes once the training loss is small, while with weight "
        "decay it keeps decreasing."
    ),
    source=_source("§6 (ablation on weight decay)"),
    source_verdict="holds",
    params=NoWDParams,
    controls=(
        Control(
            name="decay-in-both",
            breaks="the 'without weight decay' arm runs with weight decay 0.01 too, so its sharpness keeps moving",
            expect="refuted",
            changes={"baseline_weight_decay": 0.01},
        ),
    ),
    rule=AllOf(
        AtMost(
            "max_rel_change_no_wd_after_small_loss",
            param("stagnation"),
            why="'freezes': without WD, sharpness moves by at most 1% once the loss is below small_loss",
        ),
        AtLeast(
            "min_rel_reduction_with_wd_same_window",
            param("reduction"),
            why="'keeps decreasing': with WD the same window lowers it by at least 5%, five times the frozen drift",
        ),
    ),
    expected_failure=(
        "over 5 seeds the arm without weight decay is frozen in every run (≤ 0.09% change once the loss is small), "
        "but with weight decay the same window lowers spherical sharpness by ≥ 5% in every run only for seeds 1–3: "
        "seeds 0 and 4 each have a run where it falls by 0.8% or rises by 3.1%; seed-dependent"
    ),
    expected_failure_modes=("full",),
    quick={**QUICK, "inits": 2},
    full=FULL,
)
def no_wd_no_reduction(p: NoWDParams, ctx: ClaimContext) -> Outcome:
    frozen, reduced = [], []
    for problem, w0 in _problems(p, ctx):
        nowd = _gd(problem, w0, p, weight_decay=p.baseline_weight_decay)
        wd = _gd(problem, w0, p)
        for i in range(w0.shape[0]):
            small = np.argmax(nowd.loss[:, i] <= p.small_loss)
            if nowd.loss[small, i] > p.small_loss:
                raise RuntimeError("GD without WD did not reach the small-loss phase; raise horizon")
            seg = nowd.sharpness[small:, i]
            frozen.append(float((seg.max() - seg.min()) / seg[0]))
            reduced.append(float(1 - wd.sharpness[-1, i] / wd.sharpness[small, i]))
    return Outcome(
        evidence={
            "max_rel_change_no_wd_after_small_loss": max(frozen),
            "min_rel_reduction_with_wd_same_window": min(reduced),
            "no_wd_changes": frozen,
            "wd_reductions": reduced,
        },
        thresholds={"small_loss": p.small_loss},
    )


class GeneralizationParams(DynamicsParams):
    n_test: PositiveInt = 4000
    flow_time: PositiveFloat = Field(default=600.0, description="t_end of gradient flow with WD")
    init: Literal["random", "teacher"] = Field(
        default="random", description="random inits, or every init along the teacher w* (the control)"
    )


@register(
    id="lyu2022.flatter-generalizes-here",
    kind="empirical",
    seeds=5,
    title="On BN linear regression the flatter GD+WD limit also has lower test error",
    statement=(
        "On fresh samples from the teacher, the GD+WD limit has lower spherical sharpness and lower test MSE than the "
        "gradient-flow-with-WD and GD-without-WD limits."
    ),
    source=_source("§1 and §5 (generalization benefit of sharpness reduction)"),
    source_verdict="holds",
    params=GeneralizationParams,
    controls=(
        Control(
            name="teacher-init",
            breaks="every run starts on the noiseless teacher's direction, an interpolant the methods without the "
            "sharpness-reducing drift keep: their limits are the teacher itself",
            expect="refuted",
            changes={"init": "teacher"},
        ),
    ),
    rule=AllOf(
        *(
            AtMost(
                f"{m}_GD+WD",
                measured(f"{m}_{other}"),
                strict=True,
                why=f"the statement: GD+WD's limit has the lowest mean {what}",
            )
            for m, what in (("test_mse", "test MSE"), ("spherical_sharpness", "spherical sharpness"))
            for other in ("GD, no WD", "GF+WD")
        )
    ),
    quick={**QUICK, "inits": 3},
    full={
        "scenarios": [{"n": 32, "d": 160}],
        "data_seeds": 3,
        "inits": 4,
        "horizon": 40.0,
        "log_points": 60,
    },
)
def flatter_generalizes_here(p: GeneralizationParams, ctx: ClaimContext) -> Outcome:
    results = {"GD+WD": ([], []), "GD, no WD": ([], []), "GF+WD": ([], [])}
    for s, (problem, w0) in enumerate(_problems(p, ctx)):
        if p.init == "teacher":
            w0 = w0.norm(dim=1, keepdim=True) * problem.w_star / problem.w_star.norm()
        x_test, y_test = problem.fresh_samples(p.n_test, ctx.generator("test", s))
        limits = {
            "GD+WD": _cycle_midpoint(problem, _gd(problem, w0, p).w, p.lr, p.weight_decay),
            "GD, no WD": _gd(problem, w0, p, weight_decay=0.0).w,
            "GF+WD": gradient_flow(problem, w0, weight_decay=p.weight_decay, t_end=p.flow_time, n_log=2).w,
        }
        for name, w in limits.items():
            w_t, b_t = problem.equivalent_linear(w)
            mse = ((x_test @ w_t.T + b_t - y_test[:, None]) ** 2).mean(dim=0)
            results[name][0].extend(mse.tolist())
            results[name][1].extend(spherical_sharpness(problem, w).tolist())
    means = {name: (float(np.mean(m)), float(np.mean(s))) for name, (m, s) in results.items()}
    rows = [[name, f"{m:.4g}", f"{s:.4g}", len(results[name][0])] for name, (m, s) in means.items()]
    return Outcome(
        evidence={
            **{f"test_mse_{k}": v[0] for k, v in means.items()},
            **{f"spherical_sharpness_{k}": v[1] for k, v in means.items()},
        },
        tables=[
            {
                "name": "limits: mean test MSE on fresh teacher samples and spherical sharpness",
                "headers": ["method", "test MSE", "spherical sharpness", "runs"],
                "rows": rows,
            }
        ],
    )
