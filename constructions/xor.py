"""Wen, Li, Ma 2023: the hypercube XOR task and explicit two-layer interpolators.

Two-layer nets with a bias in the first layer only: ``f(x) = W2 · φ(relu(W1 x + b1))`` where φ is
the identity (2-MLP-Bias, or 2-MLP-No-Bias with b1 = 0) or the simplified LayerNorm
``φ(h) = h / max(‖h‖₂, ϵ)`` (2-MLP-Sim-LN). Constructions follow ../shared/notes/formulas.md.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch
from torch import nn

from constructions.specs import XorSpec

__all__ = [
    "XorData",
    "TwoLayerNet",
    "simbn_scale",
    "build_xor",
    "bias_memorizer",
    "bias_generalizer",
    "nobias_width4",
    "simln_memorizer",
    "simln_generalizer",
]


@dataclass(frozen=True)
class XorData:
    """Training points and the hypercube distribution (an ``evaluators.Distribution``)."""

    x: torch.Tensor  # (n, d) in {−1, 1}
    y: torch.Tensor  # (n,)
    d: int

    def support_size(self) -> int:
        return 2**self.d

    def support(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x = torch.tensor(list(itertools.product([-1.0, 1.0], repeat=self.d)), dtype=torch.float64)
        return x, x[:, 0] * x[:, 1], torch.full((len(x),), 2.0**-self.d, dtype=torch.float64)

    def sample(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randint(0, 2, (n, self.d), generator=generator).double() * 2 - 1
        return x, x[:, 0] * x[:, 1]


def build_xor(spec: XorSpec, generator: torch.Generator) -> XorData:
    """n distinct points drawn uniformly from {−1, 1}^d (without replacement), y = x1·x2."""
    if spec.n > 2**spec.d:
        raise ValueError(f"n = {spec.n} exceeds the 2^d = {2**spec.d} points of the cube")
    seen: dict[tuple, None] = {}
    while len(seen) < spec.n:
        bits = torch.randint(0, 2, (spec.n, spec.d), generator=generator)
        for row in bits.tolist():
            seen.setdefault(tuple(row), None)
            if len(seen) == spec.n:
                break
    x = torch.tensor(list(seen), dtype=torch.float64) * 2 - 1
    return XorData(x, x[:, 0] * x[:, 1], spec.d)


class TwoLayerNet(nn.Module):
    """``W2 · φ(relu(W1 x + b1))`` with φ = identity, the simplified LayerNorm ``h / max(‖h‖, ϵ)`` or the
    simplified BatchNorm ``γ[j] h[j] / √((1/N) Σ_batch h[j]²)``.

    Sim-BN normalizes over the batch it is given, so evaluate it on the whole training set (its
    statistics are the training set's, as in the paper); ``XorNets`` handles fresh test points.
    """

    def __init__(
        self,
        w1: torch.Tensor,
        b1: torch.Tensor | None,
        w2: torch.Tensor,
        *,
        simln_eps: float | None = None,
        simbn_gamma: torch.Tensor | None = None,
    ):
        super().__init__()
        if simln_eps is not None and simbn_gamma is not None:
            raise ValueError("a net has Sim-LN or Sim-BN, not both")
        self.w1 = nn.Parameter(w1.double().clone())
        self.b1 = None if b1 is None else nn.Parameter(b1.double().clone())
        self.w2 = nn.Parameter(w2.double().clone())
        self.gamma = None if simbn_gamma is None else nn.Parameter(simbn_gamma.double().clone())
        self.simln_eps = simln_eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x @ self.w1.T
        if self.b1 is not None:
            h = h + self.b1
        h = torch.relu(h)
        if self.simln_eps is not None:
            h = h / torch.clamp(h.norm(dim=1, keepdim=True), min=self.simln_eps)
        if self.gamma is not None:
            h = self.gamma * h / simbn_scale(h)
        return h @ self.w2


def simbn_scale(h: torch.Tensor, dim: int = -2) -> torch.Tensor:
    """Per-neuron √((1/N) Σ_batch h²) over the batch ``dim``, floored so that a dead neuron outputs 0, not NaN."""
    return h.pow(2).mean(dim=dim, keepdim=True).clamp_min(1e-300).sqrt()


def bias_memorizer(data: XorData, eps: float | None = None) -> TwoLayerNet:
    """Prop. 4.1: one neuron per training point, f = 0 off the training set, Tr = (4/n)Σ‖x_i'‖|y_i|."""
    d = data.d
    eps = 1.0 / d**0.5 if eps is None else eps  # any ϵ < 2/√d
    w = data.x / d**0.5
    r = (data.x.pow(2).sum(1) + 1).sqrt()
    scale = (r * data.y.abs()).sqrt()
    w1 = scale[:, None] * w / eps
    b1 = scale * (-(w * data.x).sum(1) + eps) / eps
    w2 = data.y.sign() * (data.y.abs() / r).sqrt()
    return TwoLayerNet(w1, b1, w2)


def _corner_rows(d: int, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows scale·[(−1)^i, (−1)^j, 0, …] for i, j ∈ {0, 1} and the signs (−1)^{i+j}."""
    rows, signs = [], []
    for si, sj in itertools.product([1.0, -1.0], repeat=2):
        row = torch.zeros(d, dtype=torch.float64)
        row[0], row[1] = scale * si, scale * sj
        rows.append(row)
        signs.append(si * sj)
    return torch.stack(rows), torch.tensor(signs, dtype=torch.float64)


def bias_generalizer(d: int, r: float | None = None) -> TwoLayerNet:
    """Prop. 4.2, Eq. 5: four neurons r[±1, ±1, 0, …], bias −r, output ±1/r; r = (d+1)^{1/4} by default."""
    r = (d + 1) ** 0.25 if r is None else r
    w1, signs = _corner_rows(d, r)
    return TwoLayerNet(w1, torch.full((4,), -r, dtype=torch.float64), signs / r)


def nobias_width4(d: int, eps: float = 0.1) -> TwoLayerNet:
    """An exact width-4 interpolator without bias (formulas.md)."""
    w1 = torch.zeros(4, d, dtype=torch.float64)
    w1[:, :2] = torch.tensor(
        [[1 + eps, 1 - eps], [1 + eps, -1 + eps], [-1 - eps, 1 - eps], [-1 - eps, -1 + eps]], dtype=torch.float64
    )
    w2 = torch.tensor([1.0, -1.0, -1.0, 1.0], dtype=torch.float64) / (2 - 2 * eps)
    return TwoLayerNet(w1, None, w2)


def simln_memorizer(data: XorData, eps: float = 1.0, delta: float = 0.5) -> TwoLayerNet:
    """Prop. 5.1: neuron i fires (2ϵ) only at x_i; after Sim-LN the output is y_i there, 0 elsewhere."""
    d = data.d
    w1 = 2 * eps * data.x / delta
    b1 = torch.full((len(data.x),), 2 * eps * (-d + delta) / delta, dtype=torch.float64)
    return TwoLayerNet(w1, b1, data.y.clone(), simln_eps=eps)


def simln_generalizer(d: int, eps: float = 1.0) -> TwoLayerNet:
    """Prop. 5.2: four neurons 2ϵ[±1, ±1, 0, …], bias −2ϵ, output ±1 (one-hot after Sim-LN)."""
    w1, signs = _corner_rows(d, 2 * eps)
    return TwoLayerNet(w1, torch.full((4,), -2 * eps, dtype=torch.float64), signs, simln_eps=eps)
