"""Vardhan, Taheri, Mazumdar 2026: flattest interpolators of multi-index models, via convex duality."""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
import torch
from pydantic import Field, field_validator
from scipy.optimize import minimize
from torch import nn

import evaluators as ev
from catalogue.claim import ClaimContext, Control, Figure, Outcome, Series, Source
from catalogue.registry import register
from catalogue.rules import AllOf, AtLeast, AtMost, Each, IntervalAbove, IntervalBelow, IsTrue, measured, param
from catalogue.verdicts import worst
from constructions.multi_index import (
    aligned_interpolator,
    build_multi_index,
    flattest_on_directions,
    misaligned_directions,
    noiseless,
    random_directions,
    teacher_dictionary,
)
from constructions.specs import (
    IntGrid,
    MultiIndexSpec,
    NonNegativeFloat,
    PositiveFloat,
    PositiveInt,
    Probability,
    Spec,
)
from evaluators import Objective
from evaluators.interpolation_bounds import homogeneous_features, l2_route_bound

PAPER = (
    "Vardhan, Taheri, Mazumdar, Flatness and Generalization: Learning Multi-Index Models with "
    "Homogeneous Neural Networks (2026)"
)
ARXIV = "2606.04429"
SEED_DOC = "003_9e20f0c51f726b26.txt"


_source = Source.citing(PAPER, ARXIV, SEED_DOC)


class _HomogeneousNet(nn.Module):
    """f(x) = Σ_j a_j relu(θ_jᵀx)^c with (a, θ) as parameters (for the autograd trace)."""

    def __init__(self, a: np.ndarray, theta: np.ndarray, c: int):
        super().__init__()
        self.a = nn.Parameter(torch.tensor(a, dtype=torch.float64))
        self.theta = nn.Parameter(torch.tensor(theta, dtype=torch.float64))
        self.c = c

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x @ self.theta.T) ** self.c @ self.a


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
    rows, errors = [], []
    for c in p.powers:
        for k in range(p.instances):
            rng = ctx.rng(f"lemma-c{c}", k)
            x, theta, y = rng.standard_normal((p.n, p.d)), rng.standard_normal((p.m, p.d)), rng.standard_normal(p.n)
            features, _, _ = homogeneous_features(theta, x, c)
            u = np.linalg.lstsq(features, y, rcond=None)[0]  # exact interpolator on these directions
            u = u + p.residual * rng.standard_normal(p.m) if p.residual else u
            a = u / np.linalg.norm(theta, axis=1) ** c
            closed = ev.symmetry_minimized_trace(a, theta, x, c)

            def trace_at(log_t, a=a, theta=theta, x=x, y=y, c=c):
                t = np.exp(log_t)
                obj = Objective(_HomogeneousNet(a * t ** (-c), theta * t[:, None], c), torch.tensor(x), torch.tensor(y))
                return ev.hessian_trace(obj, method="exact").value

            start = trace_at(np.zeros(p.m))
            res = minimize(trace_at, np.zeros(p.m), method="L-BFGS-B", options={"maxiter": 5000, "ftol": 1e-15})
            err = abs(res.fun - closed) / closed
            errors.append(err)
            rows.append([c, k, f"{start:.6g}", f"{res.fun:.10g}", f"{closed:.10g}", f"{err:.1e}"])
    return Outcome(
        evidence={"max_rel_err": worst(errors), "instances": len(rows)},
        tables=[
            {
                "name": "Υ closed form vs the numerical orbit minimum of the exact trace",
                "headers": ["c", "instance", "trace at t = 1", "numerical orbit min", "closed form Υ", "rel. err"],
                "rows": rows,
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
    """Υ(bad)/Υ* per (size, seed) against the split teacher and against the one-neuron teacher,
    and every duality gap touched.

    The split teacher (each teacher neuron spread evenly over the m neurons) is the flattest aligned
    interpolator of width m; the one-neuron teacher is kept for comparison.
    """
    split = np.zeros((len(p.sizes), p.seeds))
    single = np.zeros_like(split)
    gaps = []
    for i, n in enumerate(p.sizes):
        for s in range(p.seeds):
            spec = MultiIndexSpec(n=n, d=max(2, round(p.d_over_n * n)), c=c)
            gen = ctx.generator(f"bad-c{c}-rho{rho}-n{n}", s)
            problem = build_multi_index(spec, gen)
            m = round(p.width_factor * n)
            bad = flattest_on_directions(problem, misaligned_directions(problem, m, rho, gen))
            gaps.append(bad.solution.relative_gap)
            split[i, s] = bad.upsilon / aligned_interpolator(problem, m).upsilon
            single[i, s] = bad.upsilon / aligned_interpolator(problem).upsilon
    return split, single, gaps


def _slope_ci(sizes, ratios: np.ndarray, rng: np.random.Generator, resamples: int) -> tuple[float, float, float]:
    """Log-log slope of the ratio vs n (fitted to the per-n mean of log ratios: the labels of ReLU^c
    teachers are heavy-tailed for c ≥ 2, and the geometric mean is the stable summary), with a
    seed-bootstrap 95% percentile interval."""
    logn, logr = np.log(sizes), np.log(ratios)
    slope = float(np.polyfit(logn, logr.mean(axis=1), 1)[0])
    boots = []
    for _ in range(resamples):
        idx = rng.integers(0, ratios.shape[1], size=ratios.shape)
        boots.append(np.polyfit(logn, np.take_along_axis(logr, idx, axis=1).mean(axis=1), 1)[0])
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return slope, float(lo), float(hi)


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
    rng = ctx.rng("bootstrap")
    by_power, series, rows, all_gaps = {}, [], [], []
    for c in p.powers:
        target = c / (c + 1)
        ratios, single, gaps = _ratios(p, ctx, c, p.rho)
        all_gaps += gaps
        slope, lo, hi = _slope_ci(p.sizes, ratios, rng, p.bootstrap)
        local = np.diff(np.log(ratios).mean(axis=1)) / np.diff(np.log(p.sizes))
        variant, _, _ = _ratios(p, ctx, c, p.rho_variant)
        v_slope, v_lo, v_hi = _slope_ci(p.sizes, variant, rng, p.bootstrap)
        s_slope, s_lo, s_hi = _slope_ci(p.sizes, single, rng, p.bootstrap)
        by_power[f"c{c}"] = {
            "slope": slope,
            "slope_ci": [lo, hi],
            "cut": target - p.slope_tolerance,
            "target": target,
            "local_slopes": local.tolist(),
            f"rho{p.rho_variant:g}_slope_ci": [v_lo, v_hi],
            "single_neuron_teacher_slope_ci": [s_lo, s_hi],
            "single_neuron_heuristic_1_over_c_plus_1": 1 / (c + 1),
        }
        rows.append(
            [
                c,
                f"{target:.3f}",
                f"{slope:.3f}",
                f"[{lo:.3f}, {hi:.3f}]",
                ", ".join(f"{v:.2f}" for v in local),
                f"{v_slope:.3f} [{v_lo:.3f}, {v_hi:.3f}]",
                f"{s_slope:.3f} [{s_lo:.3f}, {s_hi:.3f}]",
            ]
        )
        geo = np.exp(np.log(ratios).mean(axis=1))
        series.append(Series.mean_band(f"c = {c} (ρ* = {p.rho:g})", p.sizes, ratios.T, log=True, style="markers"))
        anchor = geo[0]
        series.append(
            Series(
                label=f"n^{target:.2f} reference",
                x=list(p.sizes),
                y=[anchor * (n / p.sizes[0]) ** target for n in p.sizes],
            )
        )
    return Outcome(
        evidence={"by_power": by_power, "max_relative_duality_gap": worst(np.abs(all_gaps))},
        tables=[
            {
                "name": "slope of log(Υ(bad)/Υ*) vs log n",
                "headers": [
                    "c",
                    "c/(c+1)",
                    "slope",
                    "95% CI",
                    "local slopes (n doubling)",
                    f"slope with ρ* = {p.rho_variant:g}",
                    "slope vs the one-neuron teacher",
                ],
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
        ],
        notes=(
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
        ),
    )


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
            _, lo, hi = _slope_ci(p.sizes, ratios, rng, p.bootstrap)
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
    rows, gaps, l2_ok = [], [], True
    for c in p.powers:
        for n in p.sizes:
            gen = ctx.generator(f"cert-c{c}-n{n}")
            problem = build_multi_index(MultiIndexSpec(n=n, d=n, c=c), gen)
            for kind, directions in (
                ("misaligned", misaligned_directions(problem, 2 * n, 0.0, gen)),
                ("random", random_directions(problem, 2 * n, gen)),
            ):
                interp = flattest_on_directions(problem, directions)
                sol = interp.solution
                features, kappa, _ = homogeneous_features(interp.theta, problem.x, c)
                bound = l2_route_bound(features, problem.y, kappa, sol.p)
                primal, residual = sol.primal, sol.residual
                if p.primal_at == "min-l2":
                    a = np.linalg.lstsq(features, problem.y, rcond=None)[0]
                    primal = float(np.sum(kappa * np.abs(a) ** sol.p))
                    residual = float(np.linalg.norm(features @ a - problem.y))
                relative_gap = (primal - sol.dual) / max(abs(primal), 1e-300)
                gaps.append(abs(relative_gap))
                l2_ok &= bound <= primal * (1 + 1e-12)
                rows.append(
                    [
                        c,
                        n,
                        kind,
                        f"{primal:.6g}",
                        f"{sol.dual:.6g}",
                        f"{relative_gap:.1e}",
                        f"{bound / primal:.3f}",
                        f"{residual:.1e}",
                    ]
                )
    return Outcome(
        evidence={"max_relative_gap": worst(gaps), "l2_route_never_above_primal": l2_ok, "instances": len(rows)},
        tables=[
            {
                "name": "duality gaps (p = 2c/(c+1)) and the ℓ2-route bound",
                "headers": ["c", "n", "directions", "primal", "dual", "rel. gap", "ℓ2 bound / primal", "‖Ua − y‖"],
                "rows": rows,
            }
        ],
    )


# --------------------------------------------------------------------------- 3. generalization and noise
def _interpolators(spec: MultiIndexSpec, gen: torch.Generator, width_factor: float, pop_samples: int, seed: int):
    """Flattest over Θ* ∪ random directions, bad (misaligned, ρ* = 0) and random-feature flattest on one draw.

    Returns {kind: (Υ, excess population loss E(f − σ*)², relative duality gap)} and the share of
    |a| the dictionary-flattest puts on the Θ* rows.
    """
    problem = build_multi_index(spec, gen)
    m = round(width_factor * spec.n)
    kinds = {
        "flattest (Θ* ∪ random)": flattest_on_directions(problem, teacher_dictionary(problem, m, gen)),
        "bad (misaligned)": flattest_on_directions(problem, misaligned_directions(problem, m, 0.0, gen)),
        "random features": flattest_on_directions(problem, random_directions(problem, m, gen)),
    }
    clean = noiseless(problem)
    out = {}
    for kind, interp in kinds.items():
        pop = ev.population_loss(interp.predictor(spec.c), clean, samples=pop_samples, seed=seed)
        out[kind] = (interp.upsilon, pop.value, interp.solution.relative_gap)
    a = np.abs(kinds["flattest (Θ* ∪ random)"].a)
    return out, float(a[: spec.m_star].sum() / a.sum())


class _DictionaryParams(Spec):
    """Sum of m* single-index ReLU teachers, d = d_over_n · n, interpolators on width_factor · n directions."""

    d_over_n: PositiveFloat = 0.5
    m_star: PositiveInt = 2
    seeds: PositiveInt = 4
    width_factor: PositiveFloat = Field(default=2.0, ge=1, description="random directions = width_factor · n")
    pop_samples: PositiveInt = 20000
    bootstrap: PositiveInt = 2000


class GeneralizeParams(_DictionaryParams):
    sizes: Annotated[tuple[PositiveInt, ...], Field(min_length=3)] = (32, 64, 128, 256, 512)
    noise: PositiveFloat = Field(default=0.1, description="low label noise (the theorem's regime)")
    seeds: PositiveInt = 6


@register(
    id="vardhan2026.flattest-generalize",
    kind="empirical",
    title="Flattest interpolators of low-noise sums of single-index models generalize better with n; bad ones do not",
    statement=(
        "For y = (1/m*) Σ_k relu(θ*_kᵀx) + low noise, the flattest interpolator (over Θ* and 2n random directions) "
        "has excess population loss decreasing in n (log-log slope CI below 0), while the bad interpolators' stays "
        "above the loss of the best constant predictor, Var σ*(Θ*x)."
    ),
    source=_source("Theorems 3–4"),
    source_verdict="holds",
    params=GeneralizeParams,
    controls=(
        Control(
            name="high-noise",
            breaks="label noise 1.0, ten times the theorem's low-noise regime: an interpolator must fit the noise",
            expect="refuted",
            changes={"noise": 1.0},
        ),
    ),
    quick={"sizes": (32, 64, 128, 256), "pop_samples": 5000, "bootstrap": 500},
    full={},
    rule=AllOf(
        IntervalBelow(
            "flattest_pop_slope_ci",
            0,
            strict=True,
            why="Theorems 3–4: the flattest interpolator's excess population loss falls with n; the 95% seed-bootstrap "
            "CI of its log-log slope wholly below 0 holds, wholly above refutes",
        ),
        AtLeast(
            "bad_min_pop_loss",
            measured("kappa_var_sigma_star"),
            why="a bad interpolator does not generalize: its excess loss stays at or above that of the best constant "
            "predictor, Var σ*(Θ*x), at every n (the smallest mean over seeds is compared)",
        ),
    ),
)
def flattest_generalize(p: GeneralizeParams, ctx: ClaimContext) -> Outcome:
    kinds = ("flattest (Θ* ∪ random)", "bad (misaligned)", "random features")
    pops = {k: np.zeros((len(p.sizes), p.seeds)) for k in kinds}
    upsilon = {k: np.zeros((len(p.sizes), p.seeds)) for k in kinds}
    share, gaps = np.zeros((len(p.sizes), p.seeds)), []
    for i, n in enumerate(p.sizes):
        spec = MultiIndexSpec(
            n=n, d=max(2, round(p.d_over_n * n)), c=1, link="sum_single_index", m_star=p.m_star, noise=p.noise
        )
        for s in range(p.seeds):
            out, share[i, s] = _interpolators(
                spec, ctx.generator(f"gen-n{n}", s), p.width_factor, p.pop_samples, ctx.int_seed(f"pop-n{n}", s)
            )
            for k in kinds:
                upsilon[k][i, s], pops[k][i, s], gap = out[k]
                gaps.append(abs(gap))
    flat = pops[kinds[0]]
    slope, lo, hi = _slope_ci(p.sizes, flat, ctx.rng("bootstrap"), p.bootstrap)
    problem = build_multi_index(
        MultiIndexSpec(n=8, d=max(2, round(p.d_over_n * p.sizes[-1])), c=1, link="sum_single_index", m_star=p.m_star),
        ctx.generator("kappa"),
    )
    _, y_clean = problem.sample(p.pop_samples, ctx.generator("kappa-samples"))
    kappa = float(y_clean.var())
    bad_min = float(pops[kinds[1]].mean(axis=1).min())
    rows = [
        [
            n,
            round(p.d_over_n * n),
            *(f"{pops[k][i].mean():.4f}" for k in kinds),
            *(f"{upsilon[k][i].mean():.3g}" for k in kinds[:2]),
            f"{share[i].mean():.2f}",
        ]
        for i, n in enumerate(p.sizes)
    ]
    return Outcome(
        evidence={
            "flattest_pop_slope": slope,
            "flattest_pop_slope_ci": [lo, hi],
            "bad_min_pop_loss": bad_min,
            "kappa_var_sigma_star": kappa,
            "max_relative_duality_gap": worst(gaps),
            "flattest_pop_by_n": flat.mean(axis=1).tolist(),
            "teacher_share_by_n": share.mean(axis=1).tolist(),
        },
        tables=[
            {
                "name": "excess population loss E(f − σ*)² and Υ (means over seeds)",
                "headers": ["n", "d", *(f"pop. {k}" for k in kinds), "Υ flattest", "Υ bad", "Θ* share of |a|"],
                "rows": rows,
            }
        ],
        figures=[
            Figure(
                name="population-loss",
                title=f"Excess population loss vs n (noise {p.noise:g}, d = n/2)",
                xlabel="n",
                ylabel="E(f − σ*)²",
                logx=True,
                logy=True,
                series=[
                    *(Series.mean_band(k, p.sizes, np.asarray(pops[k]).T, log=True, style="markers") for k in kinds),
                    Series(label="Var σ* (constant predictor)", y=[kappa], style="hline"),
                ],
            )
        ],
        notes=(
            "The flattest interpolator is computed over a dictionary: Θ* plus 2n random unit directions, with outer "
            "weights from the convex program (certified by its duality gap). That is an upper bound on the infimum "
            "of Υ over all directions, not the infimum itself: a search over directions outside the dictionary can "
            "find flatter interpolators (our gradient search stalls at 1.4–1.7× the teacher's Υ; at n = 32 a column "
            "generation found one flatter than the teacher with poor population loss). The verdict is for the "
            "dictionary-flattest. With noise, the program spends most of |a| on random directions that fit the "
            "noise (Θ* share in the table) and the excess loss comes from that noise fit; the decrease is not a "
            "power law: it levels off at the largest n as the Θ* share keeps falling (evidence.flattest_pop_by_n)."
        ),
    )


class NoiseParams(_DictionaryParams):
    n: PositiveInt = 128
    noises: Annotated[tuple[NonNegativeFloat, ...], Field(min_length=2)] = (0.0, 0.1, 0.3, 1.0)

    @field_validator("noises")
    @classmethod
    def _has_noiseless_reference(cls, noises: tuple[float, ...]) -> tuple[float, ...]:
        if 0 not in noises:
            raise ValueError("must include 0, the noiseless reference")
        return noises


@register(
    id="vardhan2026.high-noise-limit",
    kind="empirical",
    title="With large label noise the separation between bad and flattest interpolators shrinks",
    statement=(
        "As the label noise grows, Υ(bad)/Υ(flattest) falls towards 1 (paired over the same inputs and directions, "
        "the log-ratio at the largest noise is below the noiseless one with a bootstrap CI below 0)."
    ),
    source=_source("§7 (limitations: high label noise)"),
    source_verdict="holds",
    params=NoiseParams,
    controls=(
        Control(
            name="no-noise",
            breaks="the noise grid (0, 0): the label noise never grows, so the ratio has nothing to fall with",
            expect="inconclusive",
            changes={"noises": (0.0, 0.0)},
        ),
    ),
    quick={"n": 64, "seeds": 3, "pop_samples": 5000, "bootstrap": 500},
    full={"seeds": 5},
    rule=IntervalBelow(
        "log_ratio_change_ci",
        0,
        strict=True,
        why="§7: the separation shrinks with noise, so log Υ(bad)/Υ(flattest) at the largest noise minus at none "
        "(paired by seed) is negative; its 95% bootstrap CI wholly below 0 holds, wholly above refutes",
    ),
)
def high_noise_limit(p: NoiseParams, ctx: ClaimContext) -> Outcome:
    d = max(2, round(p.d_over_n * p.n))
    ratio = np.zeros((len(p.noises), p.seeds))
    pop_flat, pop_bad = np.zeros_like(ratio), np.zeros_like(ratio)
    for i, zeta in enumerate(p.noises):
        spec = MultiIndexSpec(n=p.n, d=d, c=1, link="sum_single_index", m_star=p.m_star, noise=zeta)
        for s in range(p.seeds):  # the same generator per seed: same inputs, noise draw and directions at every ζ
            out, _ = _interpolators(
                spec, ctx.generator("draw", s), p.width_factor, p.pop_samples, ctx.int_seed("pop", s)
            )
            (u_flat, pop_flat[i, s], _), (u_bad, pop_bad[i, s], _) = (
                out["flattest (Θ* ∪ random)"],
                out["bad (misaligned)"],
            )
            ratio[i, s] = u_bad / u_flat
    order = np.argsort(p.noises)
    diff = np.log(ratio[order[-1]]) - np.log(ratio[order[0]])  # paired by seed
    rng = ctx.rng("bootstrap")
    boot = [rng.choice(diff, len(diff)).mean() for _ in range(p.bootstrap)]
    lo, hi = np.percentile(boot, [2.5, 97.5])
    geo = np.exp(np.log(ratio).mean(axis=1))
    rows = [
        [f"{z:g}", f"{geo[i]:.3g}", f"{pop_flat[i].mean():.4f}", f"{pop_bad[i].mean():.4f}"]
        for i, z in enumerate(p.noises)
    ]
    return Outcome(
        evidence={
            "ratio_by_noise": geo.tolist(),
            "log_ratio_change_ci": [float(lo), float(hi)],
            "log_ratio_change": float(diff.mean()),
            "noises": list(p.noises),
        },
        tables=[
            {
                "name": f"Υ(bad)/Υ(flattest) and excess population loss vs label noise (n = {p.n}, d = {d})",
                "headers": ["noise ζ", "Υ(bad)/Υ(flattest) (geo. mean)", "pop. flattest", "pop. bad"],
                "rows": rows,
            }
        ],
        figures=[
            Figure(
                name="ratio-vs-noise",
                title=f"Υ(bad)/Υ(flattest) vs label noise (n = {p.n})",
                xlabel="noise ζ",
                ylabel="ratio",
                logy=True,
                series=[
                    Series.mean_band("geometric mean over seeds", p.noises, ratio.T, log=True, style="markers"),
                    Series(label="1", y=[1.0], style="hline"),
                ],
            )
        ],
        notes="Flattest = over Θ* ∪ 2n random directions (see vardhan2026.flattest-generalize for what that bounds).",
    )
