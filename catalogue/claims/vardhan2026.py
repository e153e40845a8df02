"""Vardhan, Taheri, Mazumdar 2026: flattest interpolators of multi-index models, via convex duality.

Lemma 1, the duality certificates and the bad interpolators (Thms 1–2) live here; generalization
and noise (Thms 3–4, §7) in ``vardhan2026_generalization``, the small-n search in
``vardhan2026_search``, Prop. 2 in ``vardhan2026_balance``. The experiments are
:mod:`constructions.flattest_multi_index`.
"""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from pydantic import Field

from catalogue.claim import ClaimContext, Control, Figure, Outcome, Series, Source
from catalogue.registry import register
from catalogue.rules import AllOf, AtLeast, AtMost, Each, IntervalAbove, IsTrue, measured, param
from catalogue.verdicts import worst
from constructions import flattest_multi_index as flattest
from constructions.multi_index import build_multi_index, misaligned_directions, random_directions
from constructions.specs import IntGrid, MultiIndexSpec, NonNegativeFloat, PositiveFloat, PositiveInt, Probability, Spec
from evaluators.rates import log_log_slope_bootstrap

PAPER = (
    "Vardhan, Taheri, Mazumdar, Flatness and Generalization: Learning Multi-Index Models with "
    "Homogeneous Neural Networks (2026)"
)
ARXIV = "2606.04429"
SEED_DOC = "003_9e20f0c51f726b26.txt"


_source = Source.citing(PAPER, ARXIV, SEED_DOC)


# --------------------------------------------------------------------------- 1. Lemma 1
class LemmaParams(Spec):
    powers: IntGrid = (1, 2, 3)
    n: PositiveInt = 6
    d: PositiveInt = 3
    m: PositiveInt = 8
    instances: PositiveInt = 2
    tolerance: PositiveFloat = 1e-6
    residual: NonNegativeFloat = Field(
        default=0.0, description="outer weights moved off the interpolator by this much (0; the control's > 0)"
    )


@register(
    id="vardhan2026.flatness-is-weighted-lp",
    kind="identity",
    title="The orbit-minimal trace Υ of an interpolator is a weighted ℓp norm of u_j = a_j‖θ_j‖^c",
    statement=(
        "At an interpolator of a two-layer ReLU^c net, the minimum of Tr ∇²F_S over per-neuron rescalings equals "
        "(2/n)(1+c)c^{−c/(c+1)} Σ_j |a_j‖θ_j‖^c|^p A_j^{1/(c+1)} B_j^{c/(c+1)} with p = 2c/(c+1)."
    ),
    source=_source("Lemma 1 (constants as derived in docs/derivations.md §5)"),
    source_verdict="holds",
    params=LemmaParams,
    controls=(
        Control(
            name="off-interpolation",
            breaks="outer weights moved by 0.1·N(0, 1) off the interpolator: for c ≥ 2 the residual term "
            "(2/n) Σ r_i Tr ∇²f(x_i) joins the trace, and Lemma 1 is a statement at interpolators",
            expect="refuted",
            changes={"residual": 0.1},
        ),
    ),
    rule=AtMost(
        "max_rel_err",
        param("tolerance"),
        refuted=1e-3,
        why="Lemma 1 is exact: the closed form and the numerical orbit minimum (L-BFGS-B on log t_j, ftol 1e-15, of "
        "the float64 dense trace) agree to the optimizer's precision, which 1e-6 leaves room for; a relative error "
        "above 1e-3 is a wrong formula, not an optimizer that stopped early",
    ),
    quick={"powers": (1, 2), "instances": 1},
    full={"n": 8, "d": 4, "m": 12, "instances": 3},
)
def flatness_is_weighted_lp(p: LemmaParams, ctx: ClaimContext) -> Outcome:
    rows = []
    for c in p.powers:
        for k in range(p.instances):
            found = flattest.orbit_minimum(ctx.rng(f"lemma-c{c}", k), p.n, p.d, p.m, c, p.residual)
            rows.append(
                {"c": c, "instance": k, **found, "error": abs(found["found"] - found["closed"]) / found["closed"]}
            )
    return Outcome(
        evidence={"max_rel_err": worst([r["error"] for r in rows]), "instances": len(rows)},
        tables=[
            {
                "name": "Υ closed form vs the numerical orbit minimum of the exact trace",
                "headers": ["c", "instance", "trace at t = 1", "numerical orbit min", "closed form Υ", "rel. err"],
                "rows": [
                    [
                        r["c"],
                        r["instance"],
                        f"{r['start']:.6g}",
                        f"{r['found']:.10g}",
                        f"{r['closed']:.10g}",
                        f"{r['error']:.1e}",
                    ]
                    for r in rows
                ],
            }
        ],
    )


# --------------------------------------------------------------------------- 3 & 4. bad interpolators
class BadParams(Spec):
    sizes: Annotated[tuple[PositiveInt, ...], Field(min_length=2)] = (32, 64, 128, 256, 512)
    seeds: PositiveInt = 3
    powers: IntGrid = (1, 2)
    width_factor: PositiveFloat = Field(default=2.0, ge=1, description="m = width_factor · n")
    d_over_n: PositiveFloat = 1.0
    rho: Probability = Field(default=0.0, description="misalignment ρ* of the bad directions (Def. 2)")
    rho_variant: Probability = 0.5
    bootstrap: PositiveInt = 2000
    slope_tolerance: PositiveFloat = Field(
        default=0.05,
        description="the slope CI may fall short of c/(c+1) by this much and still hold. 0.05 as first fixed; it "
        "was widened to 0.1 in the change that turned c = 2 from inconclusive to holds, and is restored (#15). "
        "The theorem holds up to constants and log factors, and a log n factor alone moves a slope fitted over "
        "n ∈ [32, 512] by ≈ 1/ln n ≈ 0.2: no fixed tolerance absorbs an unknown log power, which is why a CI "
        "that straddles the cut is reported as inconclusive",
    )


ALIGNED = Control(
    name="aligned",
    breaks="the 'bad' directions drawn with misalignment ρ* = 1, i.e. aligned with the teacher: good interpolators, "
    "which the flattest need not beat",
    expect="refuted",
    changes={"rho": 1.0},
)


def _ratios(p: BadParams, ctx: ClaimContext, c: int, rho: float) -> tuple[np.ndarray, np.ndarray, list[float]]:
    return flattest.bad_to_flattest_ratios(
        p.sizes, p.seeds, c, rho, lambda n, s: ctx.generator(f"bad-c{c}-rho{rho}-n{n}", s),
        d_over_n=p.d_over_n, width_factor=p.width_factor,
    )  # fmt: skip


_SPLIT_TEACHER = (
    "Υ* is the teacher split evenly over the m neurons (the flattest for noiseless σ* = σ, paper §4); the CI "
    "is a 95% percentile bootstrap over seeds. Which interpolator is Υ*, the flattest, matters for c ≥ 2. "
    "Υ = C Σ_j κ_j |u_j|^p with p = 2c/(c+1) > 1 "
    "for c ≥ 2, and κ_j is the same for identical directions, so splitting a teacher neuron evenly over k "
    "copies keeps the function and lowers Υ by k^{1−p}. The flattest aligned interpolator of width m is "
    "therefore the teacher spread over all m neurons (outer weights of order 1/m, as in the paper's "
    "teacher assumption), not the one-neuron teacher. Against the one-neuron teacher the ratio grows only "
    "like n^{1/(c+1)} (last column; slope ≈ 0.36 for c = 2), which is what an earlier quick check "
    "measured. Against the split teacher it grows like n^{1/(c+1)} · m^{p−1} = n^{c/(c+1)} with m ∝ n, the "
    "theorem's rate. Υ itself is checked in `vardhan2026.flatness-is-weighted-lp`. The bad interpolator is "
    "the flattest one on its misaligned directions, with outer weights from the convex program."
)


@register(
    id="vardhan2026.bad-not-flattest",
    kind="empirical",
    title="Bad interpolators are at least n^{c/(c+1)} times sharper than the flattest, even after symmetry",
    statement=(
        "For ReLU^c nets on single-index data, the orbit-minimal trace of a bad interpolator (Def. 2) divided by the "
        "flattest interpolator's grows with n at least like n^{c/(c+1)}."
    ),
    source=_source("Theorems 1 and 2"),
    source_verdict="holds",
    params=BadParams,
    controls=(ALIGNED,),
    # quick: c = 1 only: with heavy-tailed ReLU² labels the c = 2 slope needs n up to 512 (full) to resolve
    quick={"sizes": (32, 64, 128, 256), "seeds": 8, "bootstrap": 500, "powers": (1,)},
    expected_failure=(
        "with the tolerance restored to 0.05 (#15) the seed-bootstrap slope CIs straddle the cut c/(c+1) − 0.05: "
        "full mode (5 seeds) c = 1 slope 0.504 CI [0.437, 0.564] against 0.45, c = 2 slope 0.622 CI [0.569, 0.676] "
        "against 0.617; quick mode (8 seeds, n ≤ 256) c = 1 slope 0.460 CI [0.392, 0.528]. The point slopes sit at "
        "the theorem's rates, but five to eight draws do not resolve them to ±0.05"
    ),
    full={"seeds": 5},  # ≥ 5 independent data draws in full mode (#15)
    rule=Each(
        "by_power",
        IntervalAbove(
            "slope_ci",
            measured("cut"),
            why="Theorems 1–2: Υ(bad)/Υ* grows at least like n^{c/(c+1)}, so the 95% seed-bootstrap CI of the log-log "
            "slope must clear cut = c/(c+1) − slope_tolerance (0.05, fixed before the results: see the parameter); a "
            "CI wholly below the cut refutes, one across it decides nothing",
        ),
    ),
)
def bad_not_flattest(p: BadParams, ctx: ClaimContext) -> Outcome:
    rng = ctx.rng("bootstrap")  # one stream through the powers, in order
    by_power, series, rows, all_gaps = {}, [], [], []
    for c in p.powers:
        by_power[f"c{c}"], row, curves, gaps = _bad_ratio_slopes(p, ctx, c, rng)
        rows.append(row)
        series += curves
        all_gaps += gaps
    headers = ["c", "c/(c+1)", "slope", "95% CI", "local slopes (n doubling)", f"slope with ρ* = {p.rho_variant:g}"]
    return Outcome(
        evidence={"by_power": by_power, "max_relative_duality_gap": worst(np.abs(all_gaps))},
        tables=[
            {
                "name": "slope of log(Υ(bad)/Υ*) vs log n",
                "headers": [*headers, "slope vs the one-neuron teacher"],
                "rows": rows,
            }
        ],
        figures=[
            Figure(
                name="ratio",
                title="Υ(bad) / Υ* vs n (m = 2n, d = n)",
                xlabel="n",
                ylabel="ratio",
                logx=True,
                logy=True,
                series=series,
            )
        ],  # fmt: skip
        notes=_SPLIT_TEACHER,
    )


def _bad_ratio_slopes(p: BadParams, ctx: ClaimContext, c: int, rng: np.random.Generator) -> tuple:
    """For one power c: the slopes of log(Υ(bad)/Υ*) in log n (ρ*, the variant ρ*, the one-neuron
    teacher) with bootstrap CIs, as (evidence, table row, figure series, duality gaps)."""
    target = c / (c + 1)
    ratios, single, gaps = _ratios(p, ctx, c, p.rho)
    slope, lo, hi = log_log_slope_bootstrap(p.sizes, ratios, rng, p.bootstrap)
    local = np.diff(np.log(ratios).mean(axis=1)) / np.diff(np.log(p.sizes))
    variant, _, _ = _ratios(p, ctx, c, p.rho_variant)
    v_slope, v_lo, v_hi = log_log_slope_bootstrap(p.sizes, variant, rng, p.bootstrap)
    s_slope, s_lo, s_hi = log_log_slope_bootstrap(p.sizes, single, rng, p.bootstrap)
    evidence = {
        "slope": slope,
        "slope_ci": [lo, hi],
        "cut": target - p.slope_tolerance,
        "target": target,
        "local_slopes": local.tolist(),
        f"rho{p.rho_variant:g}_slope_ci": [v_lo, v_hi],
        "single_neuron_teacher_slope_ci": [s_lo, s_hi],
        "single_neuron_heuristic_1_over_c_plus_1": 1 / (c + 1),
    }
    row = [c, f"{target:.3f}", f"{slope:.3f}", f"[{lo:.3f}, {hi:.3f}]", ", ".join(f"{v:.2f}" for v in local),
           f"{v_slope:.3f} [{v_lo:.3f}, {v_hi:.3f}]", f"{s_slope:.3f} [{s_lo:.3f}, {s_hi:.3f}]"]  # fmt: skip
    anchor = np.exp(np.log(ratios).mean(axis=1))[0]
    series = [
        Series.mean_band(f"c = {c} (ρ* = {p.rho:g})", p.sizes, ratios.T, log=True, style="markers"),
        Series(label=f"n^{target:.2f} reference", x=p.sizes, y=[anchor * (n / p.sizes[0]) ** target for n in p.sizes]),
    ]
    return evidence, row, series, gaps


@register(
    id="vardhan2026.symmetry-cannot-flatten-bad",
    kind="empirical",
    title="Even at their orbit minimum, bad interpolators stay sharper than the flattest, increasingly with n",
    statement=(
        "Rescaling symmetry cannot make a bad interpolator as flat as the flattest one: Υ(bad)/Υ* > 1 at every n and "
        "grows with n (unlike Dinh et al.'s 'anything can be made sharp' direction)."
    ),
    source=_source("Theorem 2 and the discussion after it"),
    source_verdict="holds",
    params=BadParams,
    controls=(ALIGNED,),
    quick={"sizes": (32, 64, 128, 256), "seeds": 8, "bootstrap": 500},
    full={"seeds": 5},  # ≥ 5 independent data draws in full mode (#15)
    rule=Each(
        "by_power",
        AllOf(
            AtLeast(
                "min_ratio",
                1,
                strict=True,
                why="Theorem 2: no rescaling makes a bad interpolator as flat as the flattest, so Υ(bad)/Υ* > 1 for "
                "every draw and n; one ratio ≤ 1 is a counterexample",
            ),
            IntervalAbove(
                "slope_ci",
                0,
                strict=True,
                why="'increasingly with n': the 95% seed-bootstrap CI of the log-log slope wholly above 0; wholly "
                "below 0 refutes, across 0 decides nothing",
            ),
        ),
    ),
)
def symmetry_cannot_flatten_bad(p: BadParams, ctx: ClaimContext) -> Outcome:
    rng = ctx.rng("bootstrap")
    scored, variant = {}, {}
    for c in p.powers:
        for rho, into in ((p.rho, scored), (p.rho_variant, variant)):
            ratios, _, _ = _ratios(p, ctx, c, rho)
            _, lo, hi = log_log_slope_bootstrap(p.sizes, ratios, rng, p.bootstrap)
            into[f"c{c}"] = {
                "min_ratio": float(ratios.min()),
                "ratio_by_n": np.exp(np.log(ratios).mean(axis=1)).tolist(),
                "slope_ci": [lo, hi],
            }
    return Outcome(
        evidence={"by_power": scored, f"rho{p.rho_variant:g}_by_power": variant, "rho": p.rho},
        notes=(
            f"Scored: the bad directions with misalignment ρ* = {p.rho:g}; ρ* = {p.rho_variant:g} is reported, not "
            f"scored. The theorem is asymptotic in n. With ρ* = {p.rho_variant:g} the bad interpolator can be flatter "
            "than the teacher at the smallest n (ratio < 1 in the evidence when it happens); the ratio then grows "
            "with n."
        ),
    )


# --------------------------------------------------------------------------- 2. certificates
class CertificateParams(Spec):
    sizes: IntGrid = (32, 128, 512)
    powers: IntGrid = (1, 2, 3)
    gap_tolerance: PositiveFloat = 1e-6
    primal_at: Literal["solver", "min-l2"] = Field(
        "solver",
        description="the interpolant the primal is evaluated at: the solver's minimizer, or (a control) the "
        "minimum-ℓ2 interpolant, feasible but not the minimizer",
    )


@register(
    id="vardhan2026.duality-certificate",
    kind="identity",
    title="Every flattest-interpolator value the catalogue reports is certified by convex duality",
    statement=(
        "For min Σ κ_j |a_j|^p s.t. U a = y with 1 ≤ p ≤ 2, the dual certificate closes the gap to ≤ 1e-6 relative, "
        "and the closed-form ℓ2-route bound never exceeds the primal."
    ),
    source=_source("§5 (convex characterization of flattest interpolators), Lemma 5"),
    source_verdict="holds",
    params=CertificateParams,
    controls=(
        Control(
            name="not-the-minimizer",
            breaks="the primal evaluated at the minimum-ℓ2 interpolant: feasible, so still an upper bound, but not "
            "the minimizer; the certificate must expose the gap",
            expect="refuted",
            changes={"primal_at": "min-l2"},
        ),
    ),
    rule=AllOf(
        AtMost(
            "max_relative_gap",
            param("gap_tolerance"),
            why="the statement's 1e-6: flattest-interpolator values are reported to 4–6 digits, and the solvers stop "
            "far below it (HiGHS feasibility 1e-10, trust-region Newton gradient 1e-13)",
        ),
        IsTrue(
            "l2_route_never_above_primal",
            why="weak duality: the dual at any point, the min-ℓ2 route's included, is a lower bound on the optimum",
        ),
    ),
    quick={"sizes": (16, 64), "powers": (1, 2)},
    full={"sizes": (32, 128, 512), "powers": (1, 2, 3), "gap_tolerance": 1e-6},
)
def duality_certificate(p: CertificateParams, ctx: ClaimContext) -> Outcome:
    rows = []
    for c in p.powers:
        for n in p.sizes:
            gen = ctx.generator(f"cert-c{c}-n{n}")
            problem = build_multi_index(MultiIndexSpec(n=n, d=n, c=c), gen)
            for kind, directions in (
                ("misaligned", misaligned_directions(problem, 2 * n, 0.0, gen)),
                ("random", random_directions(problem, 2 * n, gen)),
            ):
                found = flattest.certified_interpolator(problem, directions, c, at_min_l2=p.primal_at == "min-l2")
                rows.append({"c": c, "n": n, "directions": kind, **found})
    return Outcome(
        evidence={
            "max_relative_gap": worst([abs(r["relative_gap"]) for r in rows]),
            "l2_route_never_above_primal": all(r["l2_bound"] <= r["primal"] * (1 + 1e-12) for r in rows),
            "instances": len(rows),
        },
        tables=[
            {
                "name": "duality gaps (p = 2c/(c+1)) and the ℓ2-route bound",
                "headers": ["c", "n", "directions", "primal", "dual", "rel. gap", "ℓ2 bound / primal", "‖Ua − y‖"],
                "rows": [
                    [
                        r["c"],
                        r["n"],
                        r["directions"],
                        f"{r['primal']:.6g}",
                        f"{r['dual']:.6g}",
                        f"{r['relative_gap']:.1e}",
                        f"{r['l2_bound'] / r['primal']:.3f}",
                        f"{r['residual']:.1e}",
                    ]
                    for r in rows
                ],  # fmt: skip
            }
        ],
    )
