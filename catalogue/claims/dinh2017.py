"""Dinh, Pascanu, Bengio, Bengio 2017: rescalings make sharpness arbitrary without changing the function."""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
import torch
from pydantic import Field
from scipy.optimize import minimize_scalar

import evaluators as ev
from catalogue.claim import ClaimContext, Control, Figure, Outcome, Series, Source
from catalogue.registry import register
from catalogue.rules import AllOf, AtLeast, AtMost, Given, IsTrue, Near, measured, param
from catalogue.verdicts import worst
from constructions import symmetries
from constructions.digits import build_digits
from constructions.mlp_regression import build_mlp_regression
from constructions.specs import DigitsSpec, Grid, MLPRegressionSpec, PositiveFloat, PositiveInt, Spec
from constructions.training import train_lbfgs
from evaluators import Objective

PAPER = "Dinh, Pascanu, Bengio, Bengio, Sharp Minima Can Generalize For Deep Nets (ICML 2017)"
ARXIV = "1703.04933"
SEED_DOC = "002_8c6a9f7235bccccb.txt"


_EXACT = (
    "an exact identity in real arithmetic: what remains is float64 round-off, amplified by the α² spread between "
    "the rescaled blocks (≈ 1e-16 · 1e6 at α = 10³), far below the tolerance; above {refuted} no round-off explains it"
)


_SLOPE = (
    "Thms 3–4: λ1 grows like α^±2 once one block dominates; the log-log fit over α ≥ 10 (α ≤ 0.1) still sees "
    "the other block's α^∓2 term near the fit range's edge, so the exponent is allowed ±slope_tolerance"
)
_SHARPER = "the reversal: after rescaling, the clean net is sharper than the noisy one (λ1 and trace)"
_PRESERVED = (
    "T_α, per-neuron and deep rescalings are exact in real arithmetic; float64 round-off (≈ 1e-16 per operation "
    "over a few layers) stays far below the tolerance at α up to 10³; above 1e-6 no round-off explains the change"
)


_source = Source.citing(PAPER, ARXIV, SEED_DOC)


def _trained_regression(spec: MLPRegressionSpec, ctx: ClaimContext, iters: int, tag: str = "scenario"):
    problem = build_mlp_regression(spec, ctx.generator(tag))
    fit = train_lbfgs(problem.model, ev.mse, problem.data.x, problem.data.y, max_iter=iters)
    return problem.model, problem.data, fit


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


def _scaling_vector(obj: Objective, k: int, alpha: float) -> torch.Tensor:
    """The diagonal D of T_α on hidden layer k as a flat vector: θ_k (weight, bias) ×α, W_{k+1} ×1/α."""
    linear_names = [n for n in obj.layout.names if n.endswith(".weight")]
    d = torch.ones(obj.num_params, dtype=obj.dtype)
    first = linear_names[k].rsplit(".", 1)[0]
    d[obj.param_slice(f"{first}.weight")] = alpha
    if f"{first}.bias" in obj.layout.names:
        d[obj.param_slice(f"{first}.bias")] = alpha
    d[obj.param_slice(linear_names[k + 1])] = 1 / alpha
    return d


def _log_grid(lo: float, hi: float, count: int) -> tuple[float, ...]:
    """``np.logspace(lo, hi, count)`` to 12 significant digits: its last bit depends on the machine's
    vector math, and the grid is part of the spec, so unrounded it changed the spec hash between hosts."""
    return tuple(float(f"{a:.12g}") for a in np.logspace(lo, hi, count))


def _slope(alphas: np.ndarray, values: np.ndarray) -> float:
    return float(np.polyfit(np.log(alphas), np.log(values), 1)[0])


def _tanh(field: str = "scenario", **more: object) -> Control:
    """The negative control of the rescaling results: tanh is not positively homogeneous, so T_α
    changes the function and none of the algebra behind Thms 3–5 applies."""
    return Control(
        name="tanh",
        breaks="tanh instead of ReLU: tanh(αz)/α ≠ tanh(z), so T_α is no symmetry of the net",
        expect="refuted",
        changes={field: {"activation": "tanh"}, **more},
    )


# --------------------------------------------------------------------------- 1. function preserved
class RescalingParams(Spec):
    scenarios: Annotated[tuple[MLPRegressionSpec, ...], Field(min_length=1)] = (
        MLPRegressionSpec(n=32, d=4, hidden=(8,), bias=True),
        MLPRegressionSpec(n=32, d=4, hidden=(8,), bias=False),
        MLPRegressionSpec(n=32, d=4, hidden=(8, 8), bias=True),
    )
    digits: DigitsSpec | None = None
    alphas: Grid = _log_grid(-3, 3, 7)
    train_iterations: PositiveInt = 200
    tolerance: PositiveFloat = 1e-10


@register(
    id="dinh2017.rescaling-preserves-function",
    kind="identity",
    title="T_α, per-neuron and deep rescalings leave a ReLU net's function unchanged",
    statement=(
        "For ReLU MLPs with or without biases, the layer rescaling T_α, per-neuron rescaling and the deep "
        "rescaling with Π α_k = 1 leave every output, and hence train and test loss, unchanged."
    ),
    source=_source("§4, Eq. (6) and the deep extension"),
    source_verdict="holds",
    params=RescalingParams,
    controls=(_tanh("scenarios", digits=None),),
    rule=AllOf(
        AtMost("max_relative_output_change", param("tolerance"), 1e-6, why=_PRESERVED),
        AtMost("max_relative_loss_change", param("tolerance"), 1e-6, why=_PRESERVED),
    ),
    quick={},
    full={
        "scenarios": [
            {"n": 64, "d": 8, "hidden": [32], "bias": True},
            {"n": 64, "d": 8, "hidden": [32], "bias": False},
            {"n": 64, "d": 8, "hidden": [32, 32], "bias": True},
            {"n": 64, "d": 8, "hidden": [32, 32], "bias": False},
        ],
        "digits": {"n_train": 300, "n_test": 600, "hidden": [64, 64]},
        "alphas": _log_grid(-3, 3, 13),
        "train_iterations": 400,
    },
)
def rescaling_preserves_function(p: RescalingParams, ctx: ClaimContext) -> Outcome:
    nets = []
    for i, spec in enumerate(p.scenarios):
        net, data, _ = _trained_regression(spec, ctx, p.train_iterations, tag=f"scenario-{i}")
        nets.append((f"regression {spec.hidden} bias={spec.bias}", net, data))
    if p.digits is not None:
        problem = build_digits(p.digits, ctx.generator("digits"))
        train_lbfgs(problem.model, ev.mse, problem.data.x, problem.data.y, max_iter=p.train_iterations)
        nets.append((f"digits {p.digits.hidden}", problem.model, problem.data))
    gen = ctx.generator("rescalings")
    out_errs, loss_errs, rows = [], [], []
    for name, net, data in nets:
        x_all = torch.cat([data.x, data.x_test])
        with torch.no_grad():
            ref = net(x_all)
            scale = float(ref.abs().max())
            ref_losses = (ev.mse(net(data.x), data.y), ev.mse(net(data.x_test), data.y_test))
        n_layers = len(symmetries.linear_layers(net))
        for alpha in p.alphas:
            width = symmetries.linear_layers(net)[0].out_features
            exps = torch.rand(width, generator=gen, dtype=torch.float64) * 2 - 1
            deep = np.exp(np.log(alpha) * np.linspace(1, -1, n_layers))  # Π = 1
            variants = {
                "T_alpha": symmetries.layer_rescale(net, 0, alpha),
                "per_neuron": symmetries.neuron_rescale(net, 0, alpha**exps),
                "deep": symmetries.deep_rescale(net, deep.tolist()),
            }
            for kind, moved in variants.items():
                with torch.no_grad():
                    out_err = float((moved(x_all) - ref).abs().max()) / scale
                    losses = (ev.mse(moved(data.x), data.y), ev.mse(moved(data.x_test), data.y_test))
                # relative to L + mean‖f‖²: at an interpolating minimum L itself is ~0 and a
                # round-off change of f would look like a large relative change of L
                energy = float((ref**2).sum(dim=1).mean())
                loss_err = max(abs(float(a - b)) / (float(b) + energy) for a, b in zip(losses, ref_losses, strict=True))
                out_errs.append(out_err)
                loss_errs.append(loss_err)
                rows.append([name, kind, alpha, f"{out_err:.1e}", f"{loss_err:.1e}"])
    return Outcome(
        evidence={
            "max_relative_output_change": worst(out_errs),
            "max_relative_loss_change": worst(loss_errs),
            "nets": len(nets),
            "rescalings_checked": len(rows),
        },
        tables=[
            {
                "name": "max |f' − f| / max|f| and train/test loss change |ΔL| / (L + mean‖f‖²)",
                "headers": ["net", "rescaling", "α", "output change", "loss change"],
                "rows": rows,
            }
        ],
    )


# --------------------------------------------------------------------------- 2. Hessian block law
class BlockLawParams(Spec):
    scenarios: Annotated[tuple[MLPRegressionSpec, ...], Field(min_length=1)] = (
        MLPRegressionSpec(n=20, d=3, hidden=(5,), bias=True),
        MLPRegressionSpec(n=20, d=3, hidden=(5,), bias=False),
    )
    alphas: Grid = (0.01, 0.3, 5.0, 100.0)
    train_iterations: PositiveInt = 200
    tolerance: PositiveFloat = 1e-8


def _block_traces(hessian: torch.Tensor, d: torch.Tensor) -> tuple[float, float, float]:
    """(Tr H11, Tr H22, Tr rest) for the blocks the diagonal rescaling D scales up, down and not at all."""
    diag = torch.diagonal(hessian)
    up, down = d > 1, d < 1
    return float(diag[up].sum()), float(diag[down].sum()), float(diag[~(up | down)].sum())


@register(
    id="dinh2017.hessian-block-law",
    kind="identity",
    title="∇²L(T_α θ) = D_α⁻¹ ∇²L(θ) D_α⁻¹ and Tr = α⁻² Tr H11 + α² Tr H22",
    statement=(
        "Under T_α the Hessian transforms exactly as D_α⁻¹ ∇²L(θ) D_α⁻¹ with D_α = diag(α I, α⁻¹ I), so its trace "
        "is α⁻² Tr H11 + α² Tr H22 (plus the unscaled output-bias block)."
    ),
    source=_source("§4 (proofs of Thm 3–4); derived in docs/derivations.md §2"),
    source_verdict="holds",
    params=BlockLawParams,
    controls=(_tanh("scenarios"),),
    rule=AllOf(
        AtMost("max_rel_err_hessian", param("tolerance"), 1e-5, why=_EXACT.format(refuted="1e-5")),
        AtMost("max_rel_err_trace_formula", param("tolerance"), 1e-5, why=_EXACT.format(refuted="1e-5")),
    ),
    quick={},
    full={
        "scenarios": [
            {"n": 40, "d": 4, "hidden": [12], "bias": True},
            {"n": 40, "d": 4, "hidden": [12], "bias": False},
            {"n": 40, "d": 4, "hidden": [8, 8], "bias": True},
        ],
        "alphas": (1e-3, 0.01, 0.3, 5.0, 100.0, 1e3),
        "train_iterations": 400,
    },
)
def hessian_block_law(p: BlockLawParams, ctx: ClaimContext) -> Outcome:
    errs_h, errs_tr, rows = [], [], []
    for i, spec in enumerate(p.scenarios):
        net, data, _ = _trained_regression(spec, ctx, p.train_iterations, tag=f"scenario-{i}")
        obj = Objective(net, data.x, data.y)
        h = obj.hessian()
        t11, t22, rest = _block_traces(h, _scaling_vector(obj, 0, 2.0))
        for alpha in p.alphas:
            d = _scaling_vector(obj, 0, alpha)
            moved = Objective(symmetries.layer_rescale(net, 0, alpha), data.x, data.y)
            h_moved = moved.hessian()
            predicted = h / d[:, None] / d[None, :]
            err_h = _rel(h_moved, predicted)
            tr_pred = t11 / alpha**2 + alpha**2 * t22 + rest
            tr_true = ev.hessian_trace(moved, method="exact").value
            err_tr = abs(tr_true - tr_pred) / abs(tr_pred)
            errs_h.append(err_h)
            errs_tr.append(err_tr)
            rows.append(
                [
                    f"{spec.hidden} bias={spec.bias}",
                    alpha,
                    f"{err_h:.1e}",
                    f"{tr_true:.4g}",
                    f"{err_tr:.1e}",
                ]
            )
    return Outcome(
        evidence={"max_rel_err_hessian": worst(errs_h), "max_rel_err_trace_formula": worst(errs_tr)},
        tables=[
            {
                "name": "dense Hessian vs the block law (relative Frobenius error)",
                "headers": [
                    "net",
                    "α",
                    "‖H(T_αθ) − D⁻¹HD⁻¹‖/‖·‖",
                    "Tr H(T_αθ)",
                    "trace formula rel. err",
                ],
                "rows": rows,
            }
        ],
    )


# --------------------------------------------------------------------------- 3. λ1 unbounded (+ figure)
class SweepParams(Spec):
    scenario: MLPRegressionSpec = MLPRegressionSpec(n=32, d=4, hidden=(8,), bias=True)
    alphas: Grid = _log_grid(-3, 3, 13)
    train_iterations: PositiveInt = 300
    slope_tolerance: PositiveFloat = 0.1
    end_ratio: PositiveFloat = 1e4


FULL_SWEEP = {
    "scenario": {"n": 64, "d": 8, "hidden": [32]},
    "alphas": _log_grid(-3, 3, 25),
    "train_iterations": 500,
}


def _sweep(p: SweepParams, ctx: ClaimContext, with_sharpness: bool):
    net, data, fit = _trained_regression(p.scenario, ctx, p.train_iterations)
    base = Objective(net, data.x, data.y)
    seed = ctx.int_seed("lanczos")
    with torch.no_grad():
        ref = base.forward()
    out = {
        "alpha": [],
        "lambda_max": [],
        "lambda_resid": [],
        "lanczos_converged": [],
        "trace": [],
        "eps_sharpness": [],
        "adaptive": [],
        "function_change": [],
    }
    for alpha in sorted({*p.alphas, 1.0}):
        obj = Objective(symmetries.layer_rescale(net, 0, alpha), data.x, data.y)
        lam = ev.hessian_top_eigenvalue(obj, rtol=1e-12, seed=seed)
        out["alpha"].append(alpha)
        out["lambda_max"].append(lam.value)
        out["lambda_resid"].append(lam.error)
        out["lanczos_converged"].append(lam.converged)
        out["trace"].append(ev.hessian_trace(obj, method="exact").value)
        with torch.no_grad():
            out["function_change"].append(float((obj.forward() - ref).abs().max() / ref.abs().max()))
        if with_sharpness:
            out["eps_sharpness"].append(ev.epsilon_sharpness(obj, 1e-3).value)
            out["adaptive"].append(ev.adaptive_sharpness(obj, 1e-3).value)
    return {k: np.array(v) for k, v in out.items()}, fit


@register(
    id="dinh2017.lambda-max-unbounded",
    kind="construction",
    title="λ1 of the Hessian can be made arbitrarily large by T_α",
    statement=(
        "At a minimum of a one-hidden-layer ReLU net, λ1(∇²L(T_α θ)) grows like α² as α → ∞ and like α⁻² as "
        "α → 0, so it exceeds any bound while the function is unchanged."
    ),
    source=_source("Theorems 3 and 4"),
    source_verdict="holds",
    params=SweepParams,
    controls=(_tanh(),),
    rule=Given(
        IsTrue("lanczos_converged_everywhere", why="λ1 is a measured eigenvalue only where Lanczos converged"),
        AllOf(
            Near("slope_large_alpha", 2, param("slope_tolerance"), why=_SLOPE),
            Near("slope_small_alpha", -2, param("slope_tolerance"), why=_SLOPE),
            AtLeast(
                "min_end_ratio",
                param("end_ratio"),
                why="'arbitrarily large' at the grid's ends (α = 10^±3, where α^±2 predicts a 10⁶-fold growth): "
                "λ1 must exceed its α = 1 value by 10⁴ at both ends",
            ),
        ),
    ),
    quick={"alphas": _log_grid(-3, 3, 7)},
    full=FULL_SWEEP,
)
def lambda_max_unbounded(p: SweepParams, ctx: ClaimContext) -> Outcome:
    s, fit = _sweep(p, ctx, with_sharpness=True)
    a, lam = s["alpha"], s["lambda_max"]
    lam1 = float(lam[a == 1.0][0])
    hi, lo = a >= 10, a <= 0.1
    slope_hi, slope_lo = _slope(a[hi], lam[hi]), _slope(a[lo], lam[lo])
    end_ratio = min(lam[0], lam[-1]) / lam1
    series = [
        Series(label=k, x=a.tolist(), y=np.abs(s[k]).tolist(), style="markers")
        for k in ("lambda_max", "trace", "eps_sharpness", "adaptive")
    ]
    return Outcome(
        evidence={
            "slope_large_alpha": slope_hi,
            "slope_small_alpha": slope_lo,
            "lambda_max_alpha1": lam1,
            "min_end_ratio": end_ratio,
            "max_relative_function_change": float(s["function_change"].max()),
            "max_lanczos_residual": float(s["lambda_resid"].max()),
            "lanczos_converged_everywhere": bool(s["lanczos_converged"].all()),
            "train_loss": fit.loss,
        },
        thresholds={"slope_fit_ranges": "α ≥ 10 and α ≤ 0.1"},
        figures=[
            Figure(
                name="sweep",
                title="Sharpness measures under T_α (same function)",
                xlabel="α",
                ylabel="value",
                logx=True,
                logy=True,
                series=series,
            ),
            Figure(
                name="function-change",
                title="max |f_{T_α θ} − f_θ| / max |f_θ|",
                xlabel="α",
                ylabel="relative output change",
                logx=True,
                logy=False,
                series=[
                    Series(
                        label="function change",
                        x=a.tolist(),
                        y=s["function_change"].tolist(),
                        style="markers",
                    )
                ],
            ),
        ],
        notes=(
            "The seed blog outline says minima 'can be made sharper just by re-ordering the units'. Permuting hidden "
            "units leaves every Hessian eigenvalue unchanged (see `invariance.measure-symmetry-matrix`, column "
            "permutation); the paper's construction is the non-negative rescaling T_α, not a permutation."
        ),
    )


# --------------------------------------------------------------------------- 4. many eigenvalues inflated
class EigenCountParams(Spec):
    scenario: MLPRegressionSpec = MLPRegressionSpec(n=32, d=3, hidden=(6,), bias=False)
    alphas: Grid = _log_grid(0, 5, 11)
    threshold_multiple: PositiveFloat = 10.0
    train_iterations: PositiveInt = 300


@register(
    id="dinh2017.multiple-eigenvalues-inflated",
    kind="construction",
    title="T_α pushes many Hessian eigenvalues above any M, up to a rank bound",
    statement=(
        "For a one-hidden-layer ReLU net at a minimum, the number of Hessian eigenvalues above any fixed M grows "
        "with α until it reaches the rank of the second-layer block ∇²_{θ2} L."
    ),
    source=_source("Theorem 5"),
    source_verdict="holds",
    params=EigenCountParams,
    controls=(_tanh(),),
    rule=AllOf(
        IsTrue("monotone", why="Thm 5: rescaling the θ2 block up by α² can only add eigenvalues above a fixed M"),
        AtLeast(
            "final_count",
            measured("rank_bound_theta2_block"),
            why="Thm 5's bound: at the largest α every nonzero eigen-direction of the θ2 block is above M",
        ),
        AtLeast("final_count", 2, why="'many' eigenvalues: more than λ1 alone"),
    ),
    quick={},
    full={
        "scenario": {"n": 64, "d": 4, "hidden": [16], "bias": False},
        "alphas": _log_grid(0, 6, 19),
        "train_iterations": 500,
    },
)
def multiple_eigenvalues_inflated(p: EigenCountParams, ctx: ClaimContext) -> Outcome:
    net, data, _ = _trained_regression(p.scenario, ctx, p.train_iterations)
    obj = Objective(net, data.x, data.y)
    h = obj.hessian()
    m_level = p.threshold_multiple * float(torch.linalg.eigvalsh(h)[-1])
    d1 = _scaling_vector(obj, 0, 2.0)
    block22 = h[d1 < 1][:, d1 < 1]
    ev22 = torch.linalg.eigvalsh(block22)
    rank_bound = int((ev22 > 1e-10 * ev22.max()).sum())
    counts = []
    for alpha in p.alphas:  # the rescaled net's own Hessian, not the block law applied to h
        h_alpha = Objective(symmetries.layer_rescale(net, 0, alpha), data.x, data.y).hessian()
        counts.append(int((torch.linalg.eigvalsh(h_alpha) > m_level).sum()))
    return Outcome(
        evidence={
            "M": m_level,
            "rank_bound_theta2_block": rank_bound,
            "counts": counts,
            "final_count": counts[-1],
            "monotone": all(b >= a for a, b in zip(counts, counts[1:], strict=False)),
        },
        thresholds={
            "M_is_multiple_of_lambda1_at_alpha1": p.threshold_multiple,
            "rank_tolerance": "eigenvalues > 1e-10 × max of the θ2 block",
        },
        figures=[
            Figure(
                name="counts",
                title="Eigenvalues above M under T_α",
                xlabel="α",
                ylabel="count",
                logx=True,
                series=[
                    Series(label="#{λ_i > M}", x=list(p.alphas), y=counts, style="markers"),
                    Series(label="rank of θ2 block", y=[rank_bound], style="hline"),
                ],
            )
        ],
    )


# --------------------------------------------------------------------------- 5. trace bounded below
@register(
    id="dinh2017.trace-bounded-below",
    kind="identity",
    title="Rescaling makes the trace arbitrarily large, never arbitrarily small",
    statement=(
        "Over T_α the Hessian trace α⁻² Tr H11 + α² Tr H22 (+ the unscaled rest) has the positive infimum "
        "2√(Tr H11 Tr H22) (+ rest), attained at α⁴ = Tr H11 / Tr H22."
    ),
    source=_source("§4 (consequence of the block law; derived in docs/derivations.md §2)"),
    source_verdict="holds",
    params=SweepParams,
    controls=(_tanh(),),
    rule=AllOf(
        AtMost(
            "rel_err_minimum",
            1e-6,
            why="a bounded scalar search (xatol 1e-10 in log α) over the exact trace finds the minimum value to "
            "~1e-12; 1e-6 leaves room for its stopping rule, and a wrong formula misses by O(1)",
        ),
        AtMost(
            "rel_err_alpha_star",
            1e-3,
            why="the trace is flat to second order at α*, so α* is fixed only to ≈ √(value error) = √1e-6",
        ),
        AtLeast("predicted_infimum", 0, strict=True, why="'never arbitrarily small': the infimum is positive"),
        AtLeast(
            "max_trace_on_grid_over_infimum",
            100,
            why="'arbitrarily large' upwards: on the α grid the trace exceeds its infimum by two orders of magnitude",
        ),
    ),
    quick={"alphas": _log_grid(-2, 2, 9)},
    full=FULL_SWEEP,
)
def trace_bounded_below(p: SweepParams, ctx: ClaimContext) -> Outcome:
    net, data, _ = _trained_regression(p.scenario, ctx, p.train_iterations)
    obj = Objective(net, data.x, data.y)
    t11, t22, rest = _block_traces(obj.hessian(), _scaling_vector(obj, 0, 2.0))
    predicted_min = 2 * np.sqrt(t11 * t22) + rest
    predicted_alpha = (t11 / t22) ** 0.25

    def trace_at(log_alpha: float) -> float:
        moved = Objective(symmetries.layer_rescale(net, 0, float(np.exp(log_alpha))), data.x, data.y)
        return ev.hessian_trace(moved, method="exact").value

    res = minimize_scalar(trace_at, bounds=(np.log(1e-3), np.log(1e3)), method="bounded", options={"xatol": 1e-10})
    found_alpha = float(np.exp(res.x))
    err_min = abs(res.fun - predicted_min) / predicted_min
    err_alpha = abs(found_alpha - predicted_alpha) / predicted_alpha
    grid = sorted(p.alphas)
    traces = [trace_at(np.log(a)) for a in grid]
    return Outcome(
        evidence={
            "trace_at_alpha1": trace_at(0.0),
            "predicted_infimum": predicted_min,
            "numerical_minimum": float(res.fun),
            "rel_err_minimum": err_min,
            "predicted_alpha_star": predicted_alpha,
            "numerical_alpha_star": found_alpha,
            "rel_err_alpha_star": err_alpha,
            "max_trace_on_grid_over_infimum": max(traces) / predicted_min,
        },
        figures=[
            Figure(
                name="trace",
                title="Tr ∇²L(T_α θ) and its infimum",
                xlabel="α",
                ylabel="trace",
                logx=True,
                logy=True,
                series=[
                    Series(label="trace", x=grid, y=traces, style="markers"),
                    Series(label="2√(Tr H11 Tr H22) + rest", y=[float(predicted_min)], style="hline"),
                ],
            )
        ],
        notes=(
            "The seed blog outline says rescaling manipulates 'the trace and spectral norm of the Hessian however you "
            "like'. That holds upwards only: the trace is bounded below by 2√(Tr H11 Tr H22) > 0 over the T_α orbit."
        ),
    )


# --------------------------------------------------------------------------- 6. ε-sharpness
class EpsParams(SweepParams):
    epsilons: Grid = (1e-3, 5e-4)
    min_variation: PositiveFloat = 100.0
    measure: Literal["epsilon", "adaptive"] = Field(
        default="epsilon", description="Keskar's box ε-sharpness, or the T_α-invariant adaptive one (the control)"
    )


@register(
    id="dinh2017.eps-sharpness-not-invariant",
    kind="construction",
    title="Keskar's ε-sharpness varies by orders of magnitude across equivalent nets",
    statement=(
        "Keskar et al.'s box ε-sharpness (ε = 1e-3, 5e-4) of a ReLU net changes by at least 100× across T_α "
        "rescalings that leave the function identical."
    ),
    source=_source("§4 (sharpness definitions), applied to Keskar et al. 2017"),
    source_verdict="holds",
    params=EpsParams,
    controls=(
        Control(
            name="adaptive",
            breaks="the same check on adaptive sharpness (box scaled by |θ|), which T_α leaves unchanged",
            expect="refuted",
            changes={"measure": "adaptive"},
        ),
    ),
    rule=AtLeast(
        "min_max_over_min",
        param("min_variation"),
        why="the statement's 100×: two orders of magnitude across the α grid, for every ε (NaN, hence "
        "inconclusive, where a value is not a certified positive lower bound)",
    ),
    quick={"alphas": (0.01, 0.1, 10.0, 100.0)},
    full={
        "scenario": {"n": 64, "d": 8, "hidden": [32]},
        "alphas": _log_grid(-2, 2, 9),
        "train_iterations": 500,
    },
)
def eps_sharpness_not_invariant(p: EpsParams, ctx: ClaimContext) -> Outcome:
    net, data, _ = _trained_regression(p.scenario, ctx, p.train_iterations)
    alphas = sorted({*p.alphas, 1.0})
    values = {eps: [] for eps in p.epsilons}
    for alpha in alphas:
        obj = Objective(symmetries.layer_rescale(net, 0, alpha), data.x, data.y)
        for eps in p.epsilons:
            sharpness = ev.epsilon_sharpness if p.measure == "epsilon" else ev.adaptive_sharpness
            values[eps].append(sharpness(obj, eps).value)
    # a lower bound ≤ 0 at some α means the search found no ascent there: no ratio can be certified
    certified = all(min(v) > 0 for v in values.values())
    ratios = {eps: max(v) / min(v) if certified else float("nan") for eps, v in values.items()}
    return Outcome(
        evidence={
            "min_max_over_min": min(ratios.values()) if certified else float("nan"),
            **{f"max_over_min_eps_{eps:g}": r for eps, r in ratios.items()},
            **{f"eps_sharpness_{eps:g}": v for eps, v in values.items()},
            "alphas": alphas,
        },
        thresholds={"note": "values are certified lower bounds of the box maximum (L-BFGS-B)"},
        figures=[
            Figure(
                name="eps",
                title="Keskar ε-sharpness under T_α",
                xlabel="α",
                ylabel="φ (%)",
                logx=True,
                logy=True,
                series=[Series(label=f"ε = {eps:g}", x=alphas, y=v, style="markers") for eps, v in values.items()],
            )
        ],
    )


# --------------------------------------------------------------------------- 7. sharp minimum generalizes
class SharpGeneralizesParams(Spec):
    clean: DigitsSpec = DigitsSpec(n_train=150, n_test=500, hidden=(64,))
    noisy: DigitsSpec = DigitsSpec(n_train=150, n_test=500, hidden=(64,), label_noise=0.5)
    train_iterations: PositiveInt = 1500
    equal_loss_tolerance: PositiveFloat = 1e-4
    margin: PositiveFloat = Field(
        default=2.0, description="rescaled λ1 and trace must exceed the noisy net's by this factor"
    )


@register(
    id="dinh2017.sharp-minimum-generalizes",
    kind="empirical",
    seeds=5,
    title="A well-generalizing net can be made sharper than a poorly generalizing one",
    statement=(
        "On digits, a net trained on clean labels can be rescaled (same function, same test error) so that its λ1 "
        "and trace exceed those of a net with equal training loss trained on partly random labels: the 'flatter is "
        "better' ranking is reversed."
    ),
    source=_source("§5 (sharp minima can generalize)"),
    source_verdict="holds",
    params=SharpGeneralizesParams,
    controls=(
        Control(
            name="swapped-labels",
            breaks="the 'clean' net is trained on the 50% random labels and the 'noisy' one on clean labels, so "
            "the net made sharper is the worse one",
            expect="refuted",
            changes={"clean": {"label_noise": 0.5}, "noisy": {"label_noise": 0.0}},
        ),
    ),
    rule=Given(
        AtMost(
            "train_loss_gap",
            param("equal_loss_tolerance"),
            why="§5 compares minima of equal training loss; both nets are trained to MSE ≈ 0, so a gap above 1e-4 "
            "means one of them is not a minimum of the same quality",
        ),
        AllOf(
            AtLeast("clean_lambda_max_after", measured("noisy_lambda_max"), strict=True, why=_SHARPER),
            AtLeast("clean_trace_after", measured("noisy_trace"), strict=True, why=_SHARPER),
            Near("clean_test_error_after", measured("clean_test_error"), 0, why="T_α keeps the function"),
            AtMost(
                "clean_test_error",
                measured("noisy_test_error"),
                strict=True,
                why="the sharper net must also be the better one",
            ),
        ),
    ),
    quick={},
    full={
        "clean": {"n_train": 400, "n_test": 1000, "hidden": [128]},
        "noisy": {"n_train": 400, "n_test": 1000, "hidden": [128], "label_noise": 0.5},
        "train_iterations": 4000,
    },
)
def sharp_minimum_generalizes(p: SharpGeneralizesParams, ctx: ClaimContext) -> Outcome:
    nets = {}
    for tag, spec in (("clean", p.clean), ("noisy", p.noisy)):
        problem = build_digits(spec, ctx.generator(f"digits-{tag}"))
        fit = train_lbfgs(problem.model, ev.mse, problem.data.x, problem.data.y, max_iter=p.train_iterations)
        nets[tag] = (problem, fit)

    def measure(net, problem):
        obj = Objective(net, problem.data.x, problem.data.y)
        with torch.no_grad():
            test_err = ev.zero_one_error(net(problem.data.x_test), problem.test_labels)  # NaN if it diverged
            train_err = ev.zero_one_error(net(problem.data.x), problem.labels)
        return {
            "lambda_max": ev.hessian_top_eigenvalue(obj, rtol=1e-10, seed=ctx.int_seed("lanczos")).value,
            "trace": ev.hessian_trace(obj, method="exact").value,
            "train_loss": float(obj.loss()),
            "train_error": train_err,
            "test_error": test_err,
        }

    clean = measure(nets["clean"][0].model, nets["clean"][0])
    noisy = measure(nets["noisy"][0].model, nets["noisy"][0])
    # smallest α on a ×2 grid that makes the clean net sharper (λ1 and trace) than the noisy one by the margin
    alpha, after = 1.0, clean
    while (
        after["lambda_max"] < p.margin * noisy["lambda_max"] or after["trace"] < p.margin * noisy["trace"]
    ) and alpha < 1e6:
        alpha *= 2
        after = measure(symmetries.layer_rescale(nets["clean"][0].model, 0, alpha), nets["clean"][0])
    rows = [
        [
            name,
            *(f"{m[k]:.4g}" for k in ("lambda_max", "trace", "train_loss", "train_error", "test_error")),
        ]
        for name, m in (
            ("clean labels", clean),
            (f"clean, rescaled α = {alpha:g}", after),
            ("50% random labels", noisy),
        )
    ]
    return Outcome(
        evidence={
            "alpha": alpha,
            "clean_test_error": clean["test_error"],
            "clean_test_error_after": after["test_error"],
            "noisy_test_error": noisy["test_error"],
            "clean_lambda_max_before": clean["lambda_max"],
            "clean_lambda_max_after": after["lambda_max"],
            "noisy_lambda_max": noisy["lambda_max"],
            "clean_trace_after": after["trace"],
            "noisy_trace": noisy["trace"],
            "train_loss_clean": clean["train_loss"],
            "train_loss_noisy": noisy["train_loss"],
            "train_loss_gap": abs(clean["train_loss"] - noisy["train_loss"]),
            "corrupted_labels": nets["noisy"][0].corrupted,
        },
        thresholds={"alpha_search": f"smallest α = 2^k making λ1 and trace {p.margin:g}× the noisy net's"},
        tables=[
            {
                "name": "before and after rescaling the clean net",
                "headers": ["net", "λ1", "trace", "train MSE", "train error", "test error"],
                "rows": rows,
            }
        ],
    )


# --------------------------------------------------------------------------- 8. input reparametrization
class InputParams(Spec):
    scenario: MLPRegressionSpec = MLPRegressionSpec(n=24, d=3, hidden=(6,), bias=True)
    digits: DigitsSpec = DigitsSpec(n_train=100, n_test=300, hidden=(16,))
    scales: Grid = (0.01, 0.1, 10.0, 100.0)
    train_iterations: PositiveInt = 300
    tolerance: PositiveFloat = 1e-8
    compensate: bool = Field(default=True, description="θ1 → θ1/c with x → c·x (False: the control, inputs only)")


def _scale_inputs(net: torch.nn.Sequential, x: torch.Tensor, c: float, compensate: bool) -> tuple:
    """x → c·x, with θ1 → θ1/c when ``compensate`` (the reparametrization) and without (its control)."""
    return symmetries.reparametrize_inputs(net, x, c) if compensate else (net, x * c)


@register(
    id="dinh2017.input-reparametrization",
    kind="identity",
    title="Rescaling the inputs (x → c·x, θ1 → θ1/c) rescales the first-layer curvature by c²",
    statement=(
        "Replacing x by c·x and the first layer's weights by θ1/c keeps every prediction and the test error, "
        "while the first-layer Hessian block is multiplied by c² (and λ1 follows)."
    ),
    source=_source("§5 (reparametrization of the input space)"),
    source_verdict="holds",
    params=InputParams,
    controls=(
        Control(
            name="uncompensated",
            breaks="x → c·x without θ1 → θ1/c: not a reparametrization, the function changes",
            expect="refuted",
            changes={"compensate": False},
        ),
    ),
    rule=AllOf(
        AtMost("max_rel_err_first_block_vs_c2", param("tolerance"), why=_EXACT.format(refuted="the tolerance")),
        AtMost("max_test_error_change", 0, why="the reparametrized net computes the same function"),
        IsTrue("lambda_max_grows_for_large_c", why="'λ1 follows': for c ≥ 10 the first block, ×c², lifts λ1"),
    ),
    quick={},
    full={
        "scenario": {"n": 48, "d": 4, "hidden": [12]},
        "digits": {"n_train": 200, "n_test": 600, "hidden": [32]},
        "scales": (1e-3, 0.01, 0.1, 10.0, 100.0, 1e3),
        "train_iterations": 500,
    },
)
def input_reparametrization(p: InputParams, ctx: ClaimContext) -> Outcome:
    net, data, _ = _trained_regression(p.scenario, ctx, p.train_iterations)
    digits = build_digits(p.digits, ctx.generator("digits"))
    train_lbfgs(digits.model, ev.mse, digits.data.x, digits.data.y, max_iter=p.train_iterations)
    test_err = lambda m, x: float((m(x).argmax(1) != digits.test_labels).double().mean())  # noqa: E731
    with torch.no_grad():
        base_err = test_err(digits.model, digits.data.x_test)
    obj = Objective(net, data.x, data.y)
    w1 = obj.param_slice("0.weight")
    h11 = obj.hessian()[w1, w1]
    seed = ctx.int_seed("lanczos")
    lam = ev.hessian_top_eigenvalue(obj, rtol=1e-12, seed=seed).value
    block_errs, err_changes, rows = [], [], []
    lams = []
    for c in p.scales:
        moved, x_c = _scale_inputs(net, data.x, c, p.compensate)
        obj_c = Objective(moved, x_c, data.y)
        err = _rel(obj_c.hessian()[w1, w1], c**2 * h11)
        lam_c = ev.hessian_top_eigenvalue(obj_c, rtol=1e-12, seed=seed).value
        lams.append(lam_c)
        d_moved, dx = _scale_inputs(digits.model, digits.data.x_test, c, p.compensate)
        with torch.no_grad():
            err_change = abs(test_err(d_moved, dx) - base_err)
        block_errs.append(err)
        err_changes.append(err_change)
        rows.append([c, f"{err:.1e}", f"{lam_c:.4g}", f"{lam_c / lam:.3g}", f"{err_change:.3g}"])
    big = [l for c, l in zip(p.scales, lams, strict=True) if c >= 10]
    return Outcome(
        evidence={
            "max_rel_err_first_block_vs_c2": worst(block_errs),
            "max_test_error_change": worst(err_changes),
            "lambda_max_grows_for_large_c": all(l > lam for l in big),
            "digits_test_error": base_err,
            "lambda_max_c1": lam,
            "lambda_max_ratio_at_largest_c": lams[int(np.argmax(p.scales))] / lam,
        },
        tables=[
            {
                "name": "first-layer block and λ1 under x → c·x",
                "headers": [
                    "c",
                    "‖H11' − c²H11‖/‖c²H11‖",
                    "λ1",
                    "λ1 / λ1(c=1)",
                    "digits test error change",
                ],
                "rows": rows,
            }
        ],
    )
