"""Dinh, Pascanu, Bengio, Bengio 2017: rescalings make sharpness arbitrary without changing the function.

The rescaling identities (Eq. 6, the block law, Thms 3 and 4) live here; Thm 5 and the trace's
infimum over the orbit are in :mod:`catalogue.claims.dinh2017_spectrum`; what the rescalings do to
ε-sharpness and to a comparison of two minima is in :mod:`catalogue.claims.dinh2017_generalization`.
The experiments are :mod:`constructions.rescaling_orbits`.
"""

from __future__ import annotations

from typing import Annotated

import numpy as np
from pydantic import Field

from catalogue.claim import ClaimContext, Control, Figure, Outcome, Series, Source
from catalogue.registry import register
from catalogue.rules import AllOf, AtLeast, AtMost, Given, IsTrue, Near, param
from catalogue.verdicts import worst
from constructions import rescaling_orbits as orbits
from constructions.specs import DigitsSpec, Grid, MLPRegressionSpec, PositiveFloat, PositiveInt, Spec
from evaluators.rates import log_log_slope

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
_PRESERVED = (
    "T_α, per-neuron and deep rescalings are exact in real arithmetic; float64 round-off (≈ 1e-16 per operation "
    "over a few layers) stays far below the tolerance at α up to 10³; above 1e-6 no round-off explains the change"
)


_source = Source.citing(PAPER, ARXIV, SEED_DOC)

_log_grid = orbits.log_grid


_NOT_A_PERMUTATION = (
    "The seed blog outline says minima 'can be made sharper just by re-ordering the units'. Permuting hidden "
    "units leaves every Hessian eigenvalue unchanged (see `invariance.measure-symmetry-matrix`, column "
    "permutation); the paper's construction is the non-negative rescaling T_α, not a permutation."
)


def _trained_regression(spec: MLPRegressionSpec, ctx: ClaimContext, iters: int, tag: str = "scenario"):
    return orbits.trained_regression(spec, ctx.generator(tag), iters)


def _alpha_figure(name: str, title: str, ylabel: str, series: list[Series], logy: bool = True) -> Figure:
    return Figure(name=name, title=title, xlabel="α", ylabel=ylabel, logx=True, logy=logy, series=series)


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
        problem, _ = orbits.trained_digits(p.digits, ctx.generator("digits"), p.train_iterations)
        nets.append((f"digits {p.digits.hidden}", problem.model, problem.data))
    gen = ctx.generator("rescalings")
    rows = [{"net": name, **r} for name, net, data in nets for r in orbits.function_changes(net, data, p.alphas, gen)]
    return Outcome(
        evidence={
            "max_relative_output_change": worst([r["output_change"] for r in rows]),
            "max_relative_loss_change": worst([r["loss_change"] for r in rows]),
            "nets": len(nets),
            "rescalings_checked": len(rows),
        },
        tables=[
            {
                "name": "max |f' − f| / max|f| and train/test loss change |ΔL| / (L + mean‖f‖²)",
                "headers": ["net", "rescaling", "α", "output change", "loss change"],
                "rows": [
                    [r["net"], r["rescaling"], r["alpha"], f"{r['output_change']:.1e}", f"{r['loss_change']:.1e}"]
                    for r in rows
                ],
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
    rows = []
    for i, spec in enumerate(p.scenarios):
        net, data, _ = _trained_regression(spec, ctx, p.train_iterations, tag=f"scenario-{i}")
        rows += [{"net": f"{spec.hidden} bias={spec.bias}", **r} for r in orbits.block_law_errors(net, data, p.alphas)]
    return Outcome(
        evidence={
            "max_rel_err_hessian": worst([r["hessian_error"] for r in rows]),
            "max_rel_err_trace_formula": worst([r["trace_error"] for r in rows]),
        },
        tables=[
            {
                "name": "dense Hessian vs the block law (relative Frobenius error)",
                "headers": ["net", "α", "‖H(T_αθ) − D⁻¹HD⁻¹‖/‖·‖", "Tr H(T_αθ)", "trace formula rel. err"],
                "rows": [
                    [r["net"], r["alpha"], f"{r['hessian_error']:.1e}", f"{r['trace']:.4g}", f"{r['trace_error']:.1e}"]
                    for r in rows
                ],
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
    net, data, fit = _trained_regression(p.scenario, ctx, p.train_iterations)
    s = orbits.alpha_sweep(net, data, p.alphas, ctx.int_seed("lanczos"), with_sharpness=True)
    a, lam = s["alpha"], s["lambda_max"]
    lam1 = float(lam[a == 1.0][0])
    hi, lo = a >= 10, a <= 0.1
    return Outcome(
        evidence={
            "slope_large_alpha": log_log_slope(a[hi], lam[hi]),
            "slope_small_alpha": log_log_slope(a[lo], lam[lo]),
            "lambda_max_alpha1": lam1,
            "min_end_ratio": min(lam[0], lam[-1]) / lam1,
            "max_relative_function_change": float(s["function_change"].max()),
            "max_lanczos_residual": float(s["lambda_resid"].max()),
            "lanczos_converged_everywhere": bool(s["lanczos_converged"].all()),
            "train_loss": fit.loss,
        },
        thresholds={"slope_fit_ranges": "α ≥ 10 and α ≤ 0.1"},
        figures=[
            _alpha_figure(
                "sweep",
                "Sharpness measures under T_α (same function)",
                "value",
                [
                    Series(label=k, x=a, y=np.abs(s[k]), style="markers")
                    for k in ("lambda_max", "trace", "eps_sharpness", "adaptive")
                ],
            ),
            _alpha_figure(
                "function-change",
                "max |f_{T_α θ} − f_θ| / max |f_θ|",
                "relative output change",
                [Series(label="function change", x=a, y=s["function_change"], style="markers")],
                logy=False,
            ),
        ],
        notes=_NOT_A_PERMUTATION,
    )
