"""Label-noise gradient descent on Wen et al.'s two-layer ReLU net with bias, several runs at once.

One step, for every run r, on fresh noisy labels ``ỹ = y + σ ε`` (ε ~ N(0, I), redrawn each step):

    θ ← θ − η ∇_θ (1/n) Σ_i (f_θ(x_i) − ỹ_i)²,   f(x) = W2 · relu(W1 x + b1).

The gradient is written out (f is bilinear in (W1, b1) and W2 on each activation pattern), so a
step is a few small matrix products; ``tests/constructions/test_label_noise_xor.py`` checks it
against autograd. Full-batch label noise has the implicit regularizer of label-noise SGD to first
order in η (Damian, Ma, Lee 2021: ``(ησ²/…) tr ∇²L``), without the sampling noise.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from constructions.xor_training import XorNets, gauss_newton_trace, xor_outputs

__all__ = ["LabelNoiseLog", "label_noise_gradient", "train_label_noise"]


def label_noise_gradient(nets: XorNets, x: torch.Tensor, targets: torch.Tensor) -> list[torch.Tensor]:
    """∇ of ``(1/n) Σ_i (f(x_i) − t_i)²`` for every run: [dW1 (R, m, d), db1 (R, m), dW2 (R, m)];
    ``targets`` (R, n)."""
    pre = nets.w1 @ x.T + nets.b1.unsqueeze(2)  # (R, m, n)
    act = torch.relu(pre)
    out = (nets.w2.unsqueeze(2) * act).sum(1)  # (R, n)
    r = 2.0 / x.shape[0] * (out - targets)  # (R, n)
    d_w2 = (act * r.unsqueeze(1)).sum(2)
    d_pre = nets.w2.unsqueeze(2) * (pre > 0) * r.unsqueeze(1)  # (R, m, n)
    return [d_pre @ x, d_pre.sum(2), d_w2]


@dataclass(frozen=True)
class LabelNoiseLog:
    """Per-run curves at the logged steps: the exact Hessian trace (for the bias net the Gauss–Newton
    trace is exact, Tr ∇²f = 0 on each pattern) and the noise-free train MSE."""

    steps: list[int]
    trace: torch.Tensor  # (R, L)
    train_loss: torch.Tensor  # (R, L)


def train_label_noise(
    nets: XorNets,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    lr: float,
    sigma: torch.Tensor,
    steps: int,
    generator: torch.Generator,
    log_points: int = 20,
) -> tuple[XorNets, LabelNoiseLog]:
    """``steps`` label-noise GD steps; ``sigma`` (R,) per run (0: plain GD). Returns the nets and the log."""
    if nets.arch != "bias":
        raise ValueError("label-noise GD is written for the bias net (arch 'bias')")
    logged = sorted({0, steps, *torch.linspace(0, steps, log_points).round().long().tolist()})
    traces, losses = [], []
    for step in range(steps + 1):
        if step in logged:
            traces.append(gauss_newton_trace(nets, x))
            losses.append((xor_outputs(nets, x) - y).pow(2).mean(1))
        if step == steps:
            break
        noise = sigma.unsqueeze(1) * torch.randn(nets.runs, len(x), generator=generator, dtype=x.dtype)
        g_w1, g_b1, g_w2 = label_noise_gradient(nets, x, y.unsqueeze(0) + noise)
        nets = replace(nets, w1=nets.w1 - lr * g_w1, b1=nets.b1 - lr * g_b1, w2=nets.w2 - lr * g_w2)
    return nets, LabelNoiseLog(logged, torch.stack(traces, 1), torch.stack(losses, 1))
