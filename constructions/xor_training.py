"""Wen, Li, Ma 2023 §6 experiments: 1-SAM and GD+WD on the XOR nets, many runs as one tensor program.

``XorNets`` holds R independent two-layer nets (leading dimension R: seeds, ρ values, …) of one
architecture. 1-SAM (batch size 1) is the update

    w ← w − η ∇ℓ_i(w + ρ ∇ℓ_i(w) / ‖∇ℓ_i(w)‖),   ℓ_i(w) = (f_w(x_i) − y_i)²,

with an independent random order of the training points per run and epoch. For the no-bias, bias and
Sim-LN nets one sample touches W1 only through h = W1 x_i + b1, so ∇_{W1} ℓ_i = (∂ℓ_i/∂h) x_iᵀ is
rank one: the ascent point never needs a copy of W1 (h moves by ε (∂ℓ/∂h)(‖x_i‖² + 1[bias])) and the
descent is one in-place rank-one update. Sim-BN normalizes over the whole training set, so its
per-sample loss depends on every point; it takes autograd steps through the full forward.

Full-batch GD+WD is ``w ← w − η (∇L(w) + λ w)`` with L = (1/n) Σ_i ℓ_i.
"""

from __future__ import annotations

import bisect
import itertools
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from tqdm import tqdm

from constructions.sam_steps import rank_one_epoch, simbn_epoch
from constructions.xor import TwoLayerNet, simbn_scale
from evaluators.objective import Objective
from evaluators.trace import hessian_trace

__all__ = [
    "ARCHITECTURES",
    "XorNets",
    "TrainingLog",
    "init_xor_nets",
    "xor_outputs",
    "gauss_newton_trace",
    "neuron_alignment",
    "sam_epoch",
    "sam_step_autograd",
    "simbn_step_autograd",
    "gd_weight_decay_step",
    "train_xor",
    "Phase",
    "TrainingState",
    "log_epochs",
]

Architecture = Literal["nobias", "bias", "simbn", "simln"]
ARCHITECTURES: tuple[str, ...] = ("nobias", "bias", "simbn", "simln")


@dataclass(frozen=True)
class XorNets:
    """R two-layer nets ``W2 · φ(relu(W1 x + b1))`` stacked along dimension 0 (see ``TwoLayerNet``)."""

    arch: Architecture
    w1: torch.Tensor  # (R, m, d)
    b1: torch.Tensor | None  # (R, m); None without bias
    w2: torch.Tensor  # (R, m)
    gamma: torch.Tensor | None  # (R, m); Sim-BN only
    simln_eps: float = 1.0

    @property
    def runs(self) -> int:
        return self.w1.shape[0]

    def tensors(self) -> list[torch.Tensor]:
        return [t for t in (self.w1, self.b1, self.w2, self.gamma) if t is not None]

    def module(self, run: int) -> TwoLayerNet:
        """Run ``run`` as a float64 ``TwoLayerNet`` for the evaluators (Sim-BN: evaluate on the training set)."""
        return TwoLayerNet(
            self.w1[run],
            None if self.b1 is None else self.b1[run],
            self.w2[run],
            simln_eps=self.simln_eps if self.arch == "simln" else None,
            simbn_gamma=None if self.gamma is None else self.gamma[run],
        )


def init_xor_nets(
    arch: Architecture,
    runs: int,
    width: int,
    d: int,
    generator: torch.Generator,
    *,
    first_layer_scale: float = 1.0,
    simln_eps: float = 1.0,
    simbn_gamma: float = 1.0,
) -> XorNets:
    """PyTorch's default ``nn.Linear`` init: W1, b1 ~ U(±1/√d)·scale, W2 ~ U(±1/√m); γ = ``simbn_gamma`` (Sim-BN).

    The paper does not state its init; this one keeps 1-SAM at η = 0.01 stable at d = 30, m = 500
    (per-sample curvature 2‖∇f(x_i)‖² ≈ 180 < 2/η), where N(0, 1/d) rows (≈ 530) diverge. Sim-BN's
    features have mean square 1 over the training set, so its per-sample curvature is about
    2m·γ² from the W2 block alone: with γ = 1 at m = 500 that is ≈ 1000 > 2/η = 400 at the paper's
    η = 0.005 and 1-SAM diverges within an epoch; γ = 1/4 brings it to ≈ 62.
    """
    if arch not in ARCHITECTURES:
        raise ValueError(f"arch must be one of {ARCHITECTURES}, got {arch!r}")

    def uniform(*shape, bound):
        return (torch.rand(*shape, generator=generator, dtype=torch.float64) * 2 - 1) * bound

    w1 = uniform(runs, width, d, bound=first_layer_scale / math.sqrt(d))
    b1 = uniform(runs, width, bound=first_layer_scale / math.sqrt(d))
    w2 = uniform(runs, width, bound=1 / math.sqrt(width))
    gamma = torch.full((runs, width), simbn_gamma, dtype=torch.float64) if arch == "simbn" else None
    return XorNets(arch, w1, None if arch == "nobias" else b1, w2, gamma, simln_eps)


def _relu_layer(w1: torch.Tensor, b1: torch.Tensor | None, x: torch.Tensor) -> torch.Tensor:
    h = w1 @ x.T  # (R, m, N)
    return torch.relu(h if b1 is None else h + b1.unsqueeze(2))


def _features(nets: XorNets, w1, b1, gamma, x: torch.Tensor, reference: torch.Tensor | None) -> torch.Tensor:
    """φ(relu(W1 x + b1)) for every run, shape (R, m, N); Sim-BN statistics from ``reference``."""
    a = _relu_layer(w1, b1, x)
    if nets.arch == "simln":
        return a / a.norm(dim=1, keepdim=True).clamp_min(nets.simln_eps)
    if nets.arch == "simbn":
        ref = a if reference is None else _relu_layer(w1, b1, reference)
        return gamma.unsqueeze(2) * a / simbn_scale(ref, dim=2)
    return a


def _outputs(nets: XorNets, params: list[torch.Tensor], x: torch.Tensor, reference: torch.Tensor | None):
    w1, rest = params[0], params[1:]
    b1 = rest.pop(0) if nets.b1 is not None else None
    w2 = rest.pop(0)
    gamma = rest.pop(0) if nets.gamma is not None else None
    return (w2.unsqueeze(2) * _features(nets, w1, b1, gamma, x, reference)).sum(1)


def xor_outputs(nets: XorNets, x: torch.Tensor, reference: torch.Tensor | None = None) -> torch.Tensor:
    """f(x) for every run, shape (R, N). Sim-BN uses the statistics of ``reference`` (the training set)."""
    return _outputs(nets, nets.tensors(), x, reference)


def gauss_newton_trace(nets: XorNets, x: torch.Tensor) -> torch.Tensor:
    """(2/n) Σ_i ‖∇_θ f(x_i)‖² per run (shape (R,)).

    Equals Tr ∇²L exactly for the no-bias and bias nets (f is bilinear in (W1, W2) on each
    activation pattern, so Tr ∇²f = 0) and at any interpolator for all four (Wen et al. Lemma 4.1).
    """
    params = [t.detach() for t in nets.tensors()]
    n = len(x)
    _, vjp = torch.func.vjp(lambda *ps: _outputs(nets, list(ps), x, None), *params)
    basis = torch.eye(n, dtype=x.dtype).unsqueeze(1).expand(n, nets.runs, n)
    grads = torch.func.vmap(vjp)(basis)  # per parameter: (n, R, ...)
    sq = sum(g.pow(2).flatten(2).sum(2) for g in grads)  # (n, R)
    return 2.0 / n * sq.sum(0)


def neuron_alignment(nets: XorNets) -> torch.Tensor:
    """Σ_j |c_j| ‖W1,j[1:2]‖/‖W1,j‖ / Σ_j |c_j| per run, c_j = W2,j·γ_j the neuron's output weight.

    1 when every neuron that matters reads only x[1], x[2]; ≈ √(2/d) for random directions.
    """
    c = nets.w2.abs() if nets.gamma is None else (nets.w2 * nets.gamma).abs()
    frac = nets.w1[:, :, :2].norm(dim=2) / nets.w1.norm(dim=2).clamp_min(1e-300)
    return (c * frac).sum(1) / c.sum(1).clamp_min(1e-300)


def simbn_step_autograd(nets: XorNets, x: torch.Tensor, y: torch.Tensor, index: torch.Tensor, lr, rho) -> None:
    """The autograd reference for Sim-BN: one 1-SAM step of every run through the full forward pass
    (ℓ_i depends on every point through the normalization), in place. For tests and benchmarks."""
    params = nets.tensors()
    rows = torch.arange(nets.runs)

    def grads(ps):
        ps = [p.detach().requires_grad_(True) for p in ps]
        loss = (_outputs(nets, ps, x, None)[rows, index] - y[index]).pow(2).sum()  # runs are independent
        return torch.autograd.grad(loss, ps)

    g = grads(params)
    norm = sum(t.pow(2).flatten(1).sum(1) for t in g).sqrt()
    step = torch.where(norm > 0, rho / norm, torch.zeros_like(norm))
    g = grads([p + step.view(-1, *[1] * (p.ndim - 1)) * t for p, t in zip(params, g, strict=True)])
    with torch.no_grad():
        for p, t in zip(params, g, strict=True):
            p.sub_(lr * t)


def sam_epoch(nets: XorNets, x: torch.Tensor, y: torch.Tensor, lr: float, rho: float, generator: torch.Generator):
    """One epoch of 1-SAM: every run visits the n training points in its own random order (in place).

    Rank-one nets by the one-pass compiled step, Sim-BN by closed-form gradients
    (:mod:`constructions.sam_steps`).
    """
    order = torch.argsort(torch.rand(nets.runs, len(x), generator=generator), dim=1)
    (simbn_epoch if nets.arch == "simbn" else rank_one_epoch)(nets, x, y, order, lr, rho)


def sam_step_autograd(net: TwoLayerNet, x: torch.Tensor, y: torch.Tensor, i: int, lr: float, rho: float) -> None:
    """The naive reference: one 1-SAM step on one ``TwoLayerNet`` with torch autograd (in place).

    Used to test the batched steps and as the baseline in ``benchmarks/sam.py``.
    """
    params = list(net.parameters())

    def loss():
        if net.gamma is not None:  # Sim-BN statistics come from the whole training set
            return (net(x)[i] - y[i]).pow(2)
        return (net(x[i : i + 1])[0] - y[i]).pow(2)

    g = torch.autograd.grad(loss(), params)
    norm = torch.sqrt(sum(t.pow(2).sum() for t in g))
    eps = [rho * t / norm if norm > 0 else torch.zeros_like(t) for t in g]
    with torch.no_grad():
        for p, e in zip(params, eps, strict=True):
            p.add_(e)
    g = torch.autograd.grad(loss(), params)
    with torch.no_grad():
        for p, e, t in zip(params, eps, g, strict=True):
            p.sub_(e + lr * t)


def gd_weight_decay_step(nets: XorNets, x: torch.Tensor, y: torch.Tensor, lr: float, weight_decay: float) -> None:
    """One full-batch step ``w ← w − η(∇L + λw)`` for every run, L = (1/n) Σ (f(x_i) − y_i)² (in place)."""
    params = [p.detach().requires_grad_(True) for p in nets.tensors()]
    loss = (_outputs(nets, params, x, None) - y).pow(2).mean(1).sum()  # runs are independent
    grads = torch.autograd.grad(loss, params)
    with torch.no_grad():
        for p, g in zip(nets.tensors(), grads, strict=True):
            p.sub_(lr * (g + weight_decay * p))


@dataclass(frozen=True)
class TrainingLog:
    """Per-run curves (rows: runs, columns: ``epochs``) from ``train_xor``."""

    epochs: list[int]
    train_loss: torch.Tensor
    trace: torch.Tensor  # Gauss–Newton trace, = Tr ∇²L for no-bias/bias and at interpolation
    test_error: torch.Tensor  # 0-1 error on the fixed test set
    test_error_stderr: torch.Tensor
    test_mse: torch.Tensor
    alignment: torch.Tensor
    first_layer_norm: torch.Tensor  # ‖(W1, b1)‖_F
    hessian_trace: torch.Tensor  # run 0: Tr ∇²L by the Hutch++ evaluator (NaN when not requested)
    hessian_trace_stderr: torch.Tensor
    steps: int  # optimizer steps per run
    seconds: float
    diverged_epoch: list[int | None]  # per run: the first epoch its weights were non-finite (None: never)
    last_finite_loss: list[float]  # per run: the train loss at its last logged epoch before it diverged

    @property
    def diverged_runs(self) -> int:
        return sum(e is not None for e in self.diverged_epoch)


def log_epochs(epochs: int, points: int) -> list[int]:
    """0, then ``points`` roughly geometric epochs up to ``epochs`` (curves are read on a log axis)."""
    grid = torch.logspace(0, math.log10(max(epochs, 1)), points).round().long().tolist()
    return sorted({0, *grid, epochs})


@dataclass(frozen=True)
class Phase:
    """A stretch of training with one setting: ``epochs`` epochs (GD: full-batch steps) at step size
    ``lr``, SAM radius ``rho`` (1-SAM) and weight decay ``weight_decay`` (GD)."""

    epochs: int
    lr: float
    rho: float = 0.0
    weight_decay: float = 0.0


ROWS = ("loss", "trace", "err", "se", "mse", "align", "norm", "hutch", "hutch_se")


@dataclass
class TrainingState:
    """Everything :func:`train_xor` needs to continue a run bit for bit: ``epoch`` epochs done,
    the weights, the sample-order generator, the curves logged so far, divergence, time spent."""

    epoch: int
    tensors: list[torch.Tensor]
    generator: torch.Tensor
    rows: dict[str, list[torch.Tensor]]
    logged: list[int]
    diverged: list[int | None]
    last_finite: torch.Tensor
    seconds: float
    finished: bool = False

    def to_dict(self) -> dict:
        """Plain containers of tensors and numbers (``torch.load(..., weights_only=True)`` reads them)."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, data: dict) -> TrainingState:
        return cls(**data)


def train_xor(
    nets: XorNets,
    x: torch.Tensor,
    y: torch.Tensor,
    test_x: torch.Tensor,
    test_y: torch.Tensor,
    *,
    method: Literal["sam", "gd"],
    phases: Sequence[Phase],
    generator: torch.Generator,
    log_points: int = 24,
    hessian_samples: int = 0,
    resume: TrainingState | None = None,
    checkpoint: Callable[[TrainingState], None] | None = None,
    checkpoint_every: float = 300.0,
    progress: bool = False,
) -> TrainingLog:
    """Train ``nets`` in place by 1-SAM or GD+WD through ``phases`` and log the curves at ~geometric epochs.

    Divergence is checked once per epoch: a run whose weights turn non-finite is recorded in
    ``diverged_epoch`` and its logged metrics are NaN from then on (its 0-1 error too: a NaN output
    is never a correct prediction); once every run has diverged, training stops with one last log.

    Args:
        phases: the schedule, e.g. ρ 0.05 then 0.1 for the bias net (Wen et al. Table 2).
        log_points: number of logged epochs besides 0 and the last.
        hessian_samples: if > 0, also log run 0's Tr ∇²L from the Hutch++ evaluator with this many
            Hessian-vector products (the Gauss–Newton trace equals it only at interpolation for
            Sim-LN and Sim-BN).
        resume: a state from ``checkpoint`` of the same run (same nets, data, phases and
            generator seed): training continues from it and ends with the same numbers, bit for bit.
        checkpoint: called with the state every ``checkpoint_every`` seconds of training, and once at
            the end (``finished``); the caller stores it (atomically) for ``resume``.
        progress: a progress bar on stderr (epochs, steps/s, time left).
    """
    total = sum(p.epochs for p in phases)
    ends = list(itertools.accumulate(p.epochs for p in phases))
    steps_per_epoch = 1 if method == "gd" else len(x)
    state = resume or TrainingState(
        epoch=0,
        tensors=[],
        generator=generator.get_state(),
        rows={k: [] for k in ROWS},
        logged=log_epochs(total, log_points),
        diverged=[None] * nets.runs,
        last_finite=torch.full((nets.runs,), math.nan, dtype=torch.float64),
        seconds=0.0,
    )
    if resume is not None:
        for t, saved in zip(nets.tensors(), resume.tensors, strict=True):
            t.copy_(saved)
        generator.set_state(resume.generator)
    marks = set(state.logged)
    start = last_save = time.perf_counter()
    bar = tqdm(
        total=total,
        initial=state.epoch,
        unit="epoch",
        desc=f"{nets.arch} {method}",
        disable=not progress or state.finished,
        file=sys.stderr,
        dynamic_ncols=True,
    )

    def snapshot(finished: bool = False) -> TrainingState:
        state.tensors = [t.clone() for t in nets.tensors()]
        state.generator = generator.get_state()
        state.seconds += time.perf_counter() - start
        state.finished = finished
        return state

    while not state.finished:
        epoch = state.epoch
        if checkpoint is not None and epoch > 0 and time.perf_counter() - last_save >= checkpoint_every:
            checkpoint(snapshot())
            start = last_save = time.perf_counter()
        finite = _finite_runs(nets)
        for run in (~finite).nonzero().flatten().tolist():
            state.diverged[run] = epoch if state.diverged[run] is None else state.diverged[run]
        all_diverged = not bool(finite.any())
        if all_diverged:  # nothing left to train: one last (undefined) log at this epoch
            state.logged = [e for e in state.logged if e < epoch] + [epoch]
        if epoch in marks or all_diverged:
            state.last_finite = _log(
                state.rows, nets, x, y, test_x, test_y, finite, state.last_finite, hessian_samples, epoch
            )
        if epoch == total or all_diverged:
            break
        phase = phases[bisect.bisect_right(ends, epoch)]
        if method == "gd":
            gd_weight_decay_step(nets, x, y, phase.lr, phase.weight_decay)
        else:
            sam_epoch(nets, x, y, phase.lr, phase.rho, generator)
        state.epoch = epoch + 1
        bar.update(1)
        if bar.format_dict["rate"]:
            bar.set_postfix_str(f"{bar.format_dict['rate'] * steps_per_epoch * nets.runs:,.0f} steps/s", refresh=False)
    bar.close()
    if not state.finished:
        snapshot(finished=True)
        if checkpoint is not None:
            checkpoint(state)

    def stack(k):
        return torch.stack(state.rows[k], dim=1)

    return TrainingLog(
        state.logged,
        stack("loss"),
        stack("trace"),
        stack("err"),
        stack("se"),
        stack("mse"),
        stack("align"),
        stack("norm"),
        torch.stack(state.rows["hutch"]),
        torch.stack(state.rows["hutch_se"]),
        steps=state.epoch * steps_per_epoch,
        seconds=state.seconds,
        diverged_epoch=list(state.diverged),
        last_finite_loss=state.last_finite.tolist(),
    )


def _log(rows, nets, x, y, test_x, test_y, finite, last_finite, hessian_samples, epoch) -> torch.Tensor:
    """Append one logged epoch to ``rows``; returns the per-run last finite train loss."""
    undefined = torch.zeros(nets.runs, dtype=torch.float64).masked_fill(~finite, math.nan)  # NaN, not a number
    with torch.no_grad():
        train_out = xor_outputs(nets, x)
        test_out = xor_outputs(nets, test_x, reference=x)
    err = (test_out * test_y <= 0).double().mean(1) + undefined
    loss = (train_out - y).pow(2).mean(1) + undefined
    rows["loss"].append(loss)
    rows["trace"].append(gauss_newton_trace(nets, x) + undefined)
    rows["err"].append(err)
    rows["se"].append((err * (1 - err) / len(test_y)).sqrt())
    rows["mse"].append((test_out - test_y).pow(2).mean(1) + undefined)
    rows["align"].append(neuron_alignment(nets) + undefined)
    first = nets.w1.pow(2).sum((1, 2)) + (0 if nets.b1 is None else nets.b1.pow(2).sum(1))
    rows["norm"].append(first.sqrt() + undefined)
    est = (
        hessian_trace(Objective(nets.module(0), (x, y)), method="hutch++", samples=hessian_samples, seed=epoch)
        if hessian_samples and finite[0]
        else None
    )
    rows["hutch"].append(torch.tensor(math.nan if est is None else est.value))
    rows["hutch_se"].append(torch.tensor(math.nan if est is None else est.error))
    return torch.where(finite, loss, last_finite)


def _finite_runs(nets: XorNets) -> torch.Tensor:
    """Which runs have only finite weights (shape (R,)); one cheap pass per epoch."""
    return torch.stack([t.isfinite().flatten(1).all(1) for t in nets.tensors()]).all(0)
