"""Dinh et al. 2017, what the rescalings do to comparisons: ε-sharpness, two minima, the input space.

The identities behind them are in :mod:`catalogue.claims.dinh2017`; the experiments are
:mod:`constructions.rescaling_orbits`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

import evaluators as ev
from catalogue.claim import ClaimContext, Control, Figure, Outcome, Series
from catalogue.claims.dinh2017 import _EXACT, SweepParams, _log_grid, _source, _trained_regression
from catalogue.registry import register
from catalogue.rules import AllOf, AtLeast, AtMost, Given, IsTrue, Near, measured, param
from catalogue.verdicts import worst
from constructions import rescaling_orbits as orbits
from constructions.specs import DigitsSpec, Grid, MLPRegressionSpec, PositiveFloat, PositiveInt, Spec

_SHARPER = "the reversal: after rescaling, the clean net is sharper than the noisy one (λ1 and trace)"


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
    sharpness = ev.epsilon_sharpness if p.measure == "epsilon" else ev.adaptive_sharpness
    orbit = orbits.sharpness_along_orbit(net, data, p.alphas, p.epsilons, sharpness)
    alphas, values = orbit["alphas"], orbit["values"]
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
    clean, _ = orbits.trained_digits(p.clean, ctx.generator("digits-clean"), p.train_iterations)
    noisy, _ = orbits.trained_digits(p.noisy, ctx.generator("digits-noisy"), p.train_iterations)
    found = orbits.rescale_until_sharper(clean, noisy, p.margin, ctx.int_seed("lanczos"))
    alpha, before, after, reference = found["alpha"], found["before"], found["after"], found["reference"]
    columns = ("lambda_max", "trace", "train_loss", "train_error", "test_error")
    named = (("clean labels", before), (f"clean, rescaled α = {alpha:g}", after), ("50% random labels", reference))
    return Outcome(
        evidence={
            "alpha": alpha,
            "clean_test_error": before["test_error"],
            "clean_test_error_after": after["test_error"],
            "noisy_test_error": reference["test_error"],
            "clean_lambda_max_before": before["lambda_max"],
            "clean_lambda_max_after": after["lambda_max"],
            "noisy_lambda_max": reference["lambda_max"],
            "clean_trace_after": after["trace"],
            "noisy_trace": reference["trace"],
            "train_loss_clean": before["train_loss"],
            "train_loss_noisy": reference["train_loss"],
            "train_loss_gap": abs(before["train_loss"] - reference["train_loss"]),
            "corrupted_labels": noisy.corrupted,
        },
        thresholds={"alpha_search": f"smallest α = 2^k making λ1 and trace {p.margin:g}× the noisy net's"},
        tables=[
            {
                "name": "before and after rescaling the clean net",
                "headers": ["net", "λ1", "trace", "train MSE", "train error", "test error"],
                "rows": [[name, *(f"{m[k]:.4g}" for k in columns)] for name, m in named],
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
    digits, _ = orbits.trained_digits(p.digits, ctx.generator("digits"), p.train_iterations)
    found = orbits.input_scaling_changes(net, data, digits, p.scales, ctx.int_seed("lanczos"), compensate=p.compensate)
    lam, rows = found["lambda_max"], found["rows"]
    return Outcome(
        evidence={
            "max_rel_err_first_block_vs_c2": worst([r["block_error"] for r in rows]),
            "max_test_error_change": worst([r["test_error_change"] for r in rows]),
            "lambda_max_grows_for_large_c": all(r["lambda_max"] > lam for r in rows if r["c"] >= 10),
            "digits_test_error": found["test_error"],
            "lambda_max_c1": lam,
            "lambda_max_ratio_at_largest_c": max(rows, key=lambda r: r["c"])["lambda_max"] / lam,
        },
        tables=[
            {
                "name": "first-layer block and λ1 under x → c·x",
                "headers": ["c", "‖H11' − c²H11‖/‖c²H11‖", "λ1", "λ1 / λ1(c=1)", "digits test error change"],
                "rows": [
                    [
                        r["c"],
                        f"{r['block_error']:.1e}",
                        f"{r['lambda_max']:.4g}",
                        f"{r['lambda_max'] / lam:.3g}",
                        f"{r['test_error_change']:.3g}",
                    ]
                    for r in rows
                ],
            }
        ],
    )
