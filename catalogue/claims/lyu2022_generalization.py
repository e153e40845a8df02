"""Lyu, Li, Arora 2022: does the flatter limit of GD+WD generalize better here (Thm 5.1's min-norm
limit against gradient flow's, on BN linear regression)?
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from catalogue.claim import ClaimContext, Control, Outcome
from catalogue.claims.lyu2022 import QUICK, DynamicsParams, _gd, _problems, _source
from catalogue.registry import register
from catalogue.rules import AllOf, AtMost, measured
from constructions import bn_dynamics
from constructions.bn_regression import gradient_flow, spherical_sharpness_per_row
from constructions.specs import PositiveFloat, PositiveInt


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
            "GD+WD": bn_dynamics.cycle_midpoint(problem, _gd(problem, w0, p).w, p.lr, p.weight_decay),
            "GD, no WD": _gd(problem, w0, p, weight_decay=0.0).w,
            "GF+WD": gradient_flow(problem, w0, weight_decay=p.weight_decay, t_end=p.flow_time, n_log=2).w,
        }
        for name, w in limits.items():
            results[name][0].extend(bn_dynamics.equivalent_linear_mse(problem, w, x_test, y_test).tolist())
            results[name][1].extend(spherical_sharpness_per_row(problem, w).tolist())
    means = {name: (float(np.mean(m)), float(np.mean(s))) for name, (m, s) in results.items()}
    return Outcome(
        evidence={
            **{f"test_mse_{k}": v[0] for k, v in means.items()},
            **{f"spherical_sharpness_{k}": v[1] for k, v in means.items()},
        },
        tables=[
            {
                "name": "limits: mean test MSE on fresh teacher samples and spherical sharpness",
                "headers": ["method", "test MSE", "spherical sharpness", "runs"],
                "rows": [[name, f"{m:.4g}", f"{s:.4g}", len(results[name][0])] for name, (m, s) in means.items()],
            }
        ],
    )
