"""Wen, Li, Ma 2023 §6's experiments on the XOR nets: a training configuration, its 1-SAM and GD+WD runs,
and what the claims read off them (end-point summaries, the Sim-BN interpolators, the no-bias flatness).

A configuration's random draws (data, test set, initialization, sample order) come in as generators,
and a run resumes from and saves to a state handed in by the caller (``catalogue`` keeps the
checkpoint files), so the same configuration and generators give the same numbers, bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Literal

import numpy as np
import torch
from pydantic import Field

from constructions.flattest_relu import memorizer_bound
from constructions.specs import NonNegativeFloat, PositiveFloat, PositiveInt, Spec, XorSpec
from constructions.xor import XorData, build_xor
from constructions.xor_interpolators import nearest_interpolator, random_alignment
from constructions.xor_training import (
    Phase,
    TrainingLog,
    TrainingState,
    XorNets,
    gauss_newton_trace,
    init_xor_nets,
    neuron_alignment,
    train_xor,
)
from evaluators import min_trace_over_rescalings

__all__ = [
    "ADDED_FIELDS",
    "ARCH_NAMES",
    "TrainConfig",
    "final_summary",
    "flatness_over_minimum",
    "sam_degradation",
    "sam_schedule",
    "simbn_interpolators",
    "train_runs",
    "trace_infimum",
]

ARCH_NAMES = {"nobias": "2-MLP-No-Bias", "bias": "2-MLP-Bias", "simbn": "2-MLP-Sim-BN", "simln": "2-MLP-Sim-LN"}


class TrainConfig(Spec):
    """One training experiment: R runs of 1-SAM and R runs of GD+WD from the same initializations.

    Left open by the paper and chosen here: PyTorch's default init (see ``init_xor_nets``), the
    epoch where the bias net's ρ moves to 0.1 (``sam_rho_late``), Sim-LN's ϵ, the Sim-BN width
    (its 1-SAM step costs a full forward pass), and the number of epochs (the paper runs 10⁵).
    """

    arch: Literal["nobias", "bias", "simbn", "simln"]
    scenario: XorSpec = XorSpec(d=30, n=100)
    width: PositiveInt = 500
    runs: PositiveInt = 4
    sam_lr: PositiveFloat = 0.01
    sam_rho: PositiveFloat = 0.05
    sam_rho_late: tuple[PositiveInt, PositiveFloat] | None = None
    sam_epochs: PositiveInt = 1000
    sam_phases: tuple[tuple[PositiveInt, PositiveFloat, PositiveFloat], ...] | None = Field(
        None,
        min_length=1,
        description="(epochs, η, ρ) per phase of 1-SAM, as the rows of Table 2; replaces sam_epochs, sam_lr, "
        "sam_rho and sam_rho_late",
    )
    gd_lr: PositiveFloat = 0.01
    weight_decay: NonNegativeFloat = 0.05
    gd_steps: PositiveInt = 20000
    first_layer_scale: PositiveFloat = 1.0
    simln_eps: PositiveFloat = 0.01
    simbn_gamma: PositiveFloat = Field(
        1.0, description="Sim-BN's γ at init (the paper does not say; see init_xor_nets)"
    )
    test_samples: PositiveInt = 4000
    log_points: PositiveInt = 24
    hessian_samples: int = Field(60, ge=0, description="Hutch++ HVPs for run 0's Tr ∇²L at each log (0: off)")


ADDED_FIELDS = {
    "sam_phases": None,
    "simbn_gamma": 1.0,
}  # fields added later, left out of the seed hash at their default


def sam_schedule(cfg: TrainConfig) -> list[Phase]:
    """1-SAM's phases: ``sam_phases``, else η, ρ for ``sam_epochs`` with ρ → ρ' at ``sam_rho_late``."""
    if cfg.sam_phases:
        return [Phase(epochs, lr, rho) for epochs, lr, rho in cfg.sam_phases]
    if cfg.sam_rho_late is None:
        return [Phase(cfg.sam_epochs, cfg.sam_lr, cfg.sam_rho)]
    switch, late = cfg.sam_rho_late
    return [Phase(switch, cfg.sam_lr, cfg.sam_rho), Phase(cfg.sam_epochs - switch, cfg.sam_lr, late)]


def trace_infimum(cfg: TrainConfig) -> float | None:
    """inf Tr ∇²L over interpolators on XOR: 4√(d+1) (bias, Thm 4.1), 2 (Sim-LN, small ϵ, Thm 5.1), 4 (Sim-BN)."""
    return {"bias": 4 * (cfg.scenario.d + 1) ** 0.5, "simln": 2.0, "simbn": 4.0}.get(cfg.arch)


def train_runs(
    cfg: TrainConfig,
    method: Literal["sam", "gd"],
    generators: Mapping[str, torch.Generator],
    *,
    resume: TrainingState | None = None,
    checkpoint: Callable[[TrainingState], None] | None = None,
    checkpoint_every: float = 300.0,
    progress: bool = False,
) -> tuple[XorNets, TrainingLog, XorData]:
    """Train ``cfg.runs`` nets by ``method`` (1-SAM's phases, or GD+WD); returns the nets, the log and
    the data. ``generators``: ``xor`` (training set), ``test`` (test set), ``init`` and ``order``
    (1-SAM's sample order)."""
    data = build_xor(cfg.scenario, generators["xor"])
    test_x, test_y = data.sample(cfg.test_samples, generators["test"])
    nets = init_xor_nets(
        cfg.arch,
        cfg.runs,
        cfg.width,
        cfg.scenario.d,
        generators["init"],
        first_layer_scale=cfg.first_layer_scale,
        simln_eps=cfg.simln_eps,
        simbn_gamma=cfg.simbn_gamma,
    )
    phases = sam_schedule(cfg) if method == "sam" else [Phase(cfg.gd_steps, cfg.gd_lr, weight_decay=cfg.weight_decay)]
    log = train_xor(
        nets,
        data.x,
        data.y,
        test_x,
        test_y,
        method=method,
        phases=phases,
        generator=generators["order"],
        log_points=cfg.log_points,
        hessian_samples=cfg.hessian_samples,
        resume=resume,
        checkpoint=checkpoint,
        checkpoint_every=checkpoint_every,
        progress=progress,
    )
    return nets, log, data


def final_summary(log: TrainingLog) -> dict[str, float]:
    """Means over runs at the last logged epoch (test error with its Monte Carlo stderr).

    A run that diverged has NaN metrics, so the means are NaN (never a number from a diverged run);
    ``diverged_runs`` says how many, with the epochs and last finite losses.
    """
    err = log.test_error[:, -1]
    divergence = (
        {
            "diverged_runs": log.diverged_runs,
            "diverged_at_epoch": [e for e in log.diverged_epoch if e is not None],
            "last_finite_loss": [
                v for v, e in zip(log.last_finite_loss, log.diverged_epoch, strict=True) if e is not None
            ],
        }
        if log.diverged_runs
        else {"diverged_runs": 0}
    )
    return {
        **divergence,
        "train_loss_max": float(log.train_loss[:, -1].max()),
        "trace": float(log.trace[:, -1].mean()),
        "test_error": float(err.mean()),
        "test_error_stderr": float(log.test_error_stderr[:, -1].pow(2).mean().sqrt() / len(err) ** 0.5),
        "test_error_per_run": [round(v, 4) for v in err.tolist()],
        "min_test_error_epoch": int(log.epochs[int(log.test_error.mean(0).argmin())]),
        "test_mse": float(log.test_mse[:, -1].mean()),
        "alignment": float(log.alignment[:, -1].mean()),
        "steps_per_run": log.steps,
        "seconds": round(log.seconds, 1),
    }


def sam_degradation(log: TrainingLog, schedule: list[Phase]) -> dict[str, float | list]:
    """The mean test error's rise after 1-SAM's ρ switch (the end of its first phase, when it has
    more than one) and after the logged epoch nearest 4000 (where the paper sees the bias net degrade)."""
    mean_error = log.test_error.mean(0)
    switch = schedule[0].epochs if len(schedule) > 1 else None
    after = [k for k, e in enumerate(log.epochs) if switch is not None and e >= switch]
    near_4000 = min(range(len(log.epochs)), key=lambda k: abs(log.epochs[k] - 4000))
    degradation = (
        {
            "sam_test_error_at_rho_switch": float(mean_error[after[0]]),
            "sam_test_error_final": float(mean_error[-1]),
            "sam_test_error_rise_after_switch": float(mean_error[-1] - mean_error[after[0]]),
        }
        if after
        else {}
    )
    return degradation | {
        "sam_test_error_near_epoch_4000": [log.epochs[near_4000], float(mean_error[near_4000])],
        "sam_test_error_rise_after_epoch_4000": float(mean_error[-1] - mean_error[near_4000]),
    }


def simbn_interpolators(
    nets: XorNets, log: TrainingLog, data: XorData, interpolates_below: float, random_draws: int, rng
) -> tuple[dict, dict]:
    """Sim-BN after 1-SAM: the trend of Tr ∇²L against ‖(W1, b1)‖ from the first to the last logged epoch
    that interpolates (train MSE ≤ ``interpolates_below`` for every run), and, for the runs that end
    interpolating, the exact interpolator next to their final weights (Gauss–Newton projection): its
    misfit, trace and output-weighted alignment, beside chance's alignment for the same output weights
    (``random_draws`` isotropic random first layers)."""
    trace, norm = log.trace.mean(0), log.first_layer_norm.mean(0)
    near = (log.train_loss.max(0).values <= interpolates_below).nonzero().flatten()
    ending = (log.train_loss[:, -1] <= interpolates_below).nonzero().flatten()
    trend: dict = {"trace_falls_as_norm_grows": None}  # None: no logged epoch interpolates
    if len(near):  # from the first to the last logged epoch that interpolates (1-SAM may leave interpolation)
        first, last = int(near[0]), int(near[-1])
        trend = {
            "min_trace_near_interpolation": float(log.trace[:, near].min()),
            "trace_at_first_interpolation": float(trace[first]),
            "trace_at_last_interpolation": float(trace[last]),
            "first_layer_norm_at_first_interpolation": float(norm[first]),
            "first_layer_norm_at_last_interpolation": float(norm[last]),
            "trace_falls_as_norm_grows": bool(trace[last] < trace[first] and norm[last] > norm[first]),
        }
    at: dict = {"max_interpolation_misfit": None, "min_trace_at_interpolators": None}
    at["alignment_at_interpolators"], weights = None, torch.ones(1, nets.w1.shape[1], dtype=torch.float64)
    if len(ending) and not log.diverged_runs:
        kept = XorNets(
            nets.arch,
            nets.w1[ending],
            None if nets.b1 is None else nets.b1[ending],
            nets.w2[ending],
            None if nets.gamma is None else nets.gamma[ending],
            nets.simln_eps,
        )
        exact, misfit, moved = nearest_interpolator(kept, data.x, data.y)
        weights = exact.w2 if exact.gamma is None else exact.w2 * exact.gamma
        trace_there = gauss_newton_trace(exact, data.x)
        at = {
            "max_interpolation_misfit": float(misfit.max()),
            "relative_move_to_interpolator": float(moved.max()),
            "trace_at_interpolators": trace_there.tolist(),
            "min_trace_at_interpolators": float(trace_there.min()),
            "alignment_at_interpolators": float(neuron_alignment(exact).mean()),
        }
    # chance's level for the interpolators' own output weights (equal weights when there is none)
    chance = random_alignment(weights, data.d, random_draws, rng)
    at |= {
        "random_alignment_median": float(np.median(chance)),
        "random_alignment_q99": float(np.quantile(chance, 0.99)),
    }
    return trend, at


def flatness_over_minimum(nets: XorNets, data: XorData) -> list[float]:
    """Υ / min Υ per run at its end point: Υ is the trace minimized over the rescaling symmetry, and
    min Υ = (4/n)Σ‖x_i‖|y_i| for the no-bias net (docs/derivations.md §9), so 1 would be flattest. The
    end points interpolate to train MSE ≈ 1e-3; projecting them exactly costs minutes at n = 400 (Gauss–
    Newton converges only linearly through the ReLU kinks) for a change far below the digits shown."""
    x = data.x.numpy()
    floor = memorizer_bound(x, data.y.numpy())
    return [
        round(min_trace_over_rescalings(nets.w2[r].numpy(), nets.w1[r].numpy(), x, 1) / floor, 4)
        for r in range(nets.runs)
    ]
