"""A model, a batch and a loss, seen as a function of one flat parameter vector θ ∈ R^P.

Every evaluator in this package works on an :class:`Objective`. It holds a private float64 copy
of the model, so no evaluator ever mutates the caller's model (parameters, BatchNorm running
statistics or the train/eval flag), and repeated calls give identical results.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from scipy.sparse.linalg import LinearOperator
from torch import nn
from torch.func import functional_call

__all__ = ["Objective", "LossName", "mse", "zero_one_error"]

LossName = str  # "mse" | "cross_entropy"

_BATCHNORM = (nn.modules.batchnorm._BatchNorm,)


@dataclass(frozen=True)
class _ParamLayout:
    names: tuple[str, ...]
    shapes: tuple[torch.Size, ...]
    offsets: tuple[int, ...]  # start of each parameter in the flat vector, plus the total at the end

    @property
    def size(self) -> int:
        return self.offsets[-1]


@dataclass(frozen=True)
class _GradientGraph:
    """∇L at one θ with its autograd graph, for repeated Hessian-vector products."""

    snapshot: torch.Tensor  # a copy: in-place changes to the caller's θ (even through numpy) are seen
    leaf: torch.Tensor
    grad: torch.Tensor

    def matches(self, theta: torch.Tensor) -> bool:
        return theta.shape == self.snapshot.shape and torch.equal(theta, self.snapshot)


def mse(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """(1/n) Σ_i ‖f(x_i) − y_i‖²: mean over samples, sum over outputs, no ½."""
    return _mse_per_sample(output, target).mean()


def _mse_per_sample(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    target = target.reshape(output.shape)
    diff2 = (output - target) ** 2
    return diff2.reshape(diff2.shape[0], -1).sum(dim=1)


def _cross_entropy_per_sample(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cross_entropy(output, target, reduction="none")


class Objective:
    """``L(θ)`` for a fixed model, inputs and targets, with gradients and Hessian-vector products.

    The loss conventions follow the seed papers:

    * ``loss="mse"``: ``L(θ) = (1/n) Σ_i ‖f_θ(x_i) − y_i‖²`` (mean over samples, sum over outputs,
      no factor ½);
    * ``loss="cross_entropy"``: ``L(θ) = (1/n) Σ_i −log softmax(f_θ(x_i))_{y_i}``;
    * a callable ``loss(output, target) -> per-sample losses (n,)``.

    Full batch unless ``batch_size`` is given; then ``L`` is the mean of the losses of the
    consecutive, unshuffled batches of that size. BatchNorm layers always use the statistics of
    the batch the loss is evaluated on (train-mode normalization), whatever the caller's model
    flag is; every other module is evaluated in eval mode (no dropout noise), so ``L`` is a
    deterministic function of θ.

    Hessian-vector products use double backward through autograd, with the gradient graph cached
    at the last θ: ``H v = ∇_θ ⟨∇_θ L(θ), v⟩``. This is right through train-mode BatchNorm, where
    ``torch.func`` transforms are not (pytorch#85533).

    Args:
        model: a ``torch.nn.Module``; it is deep-copied and cast to ``dtype``.
        inputs: the inputs ``x_i`` (first dimension n).
        targets: the targets ``y_i`` (class indices for cross-entropy).
        loss: ``"mse"``, ``"cross_entropy"`` or a callable returning per-sample losses.
        batch_size: optional batch size (see above).
        dtype: floating point type of the copy; float64 by default for curvature work.
    """

    def __init__(
        self,
        model: nn.Module,
        inputs: torch.Tensor,
        targets: torch.Tensor,
        loss: LossName | Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = "mse",
        batch_size: int | None = None,
        dtype: torch.dtype = torch.float64,
    ) -> None:
        self.module = _private_copy(model, dtype)
        self._inputs = torch.as_tensor(inputs).to(dtype)
        if loss == "cross_entropy":
            self._targets = torch.as_tensor(targets).long()
        else:
            self._targets = torch.as_tensor(targets).to(dtype)
        if self._inputs.shape[0] != self._targets.shape[0]:
            raise ValueError(f"inputs and targets disagree on n: {self._inputs.shape[0]} vs {self._targets.shape[0]}")
        if batch_size is not None and batch_size < 1:
            raise ValueError(f"batch_size must be ≥ 1, got {batch_size}")
        if batch_size is not None and _has_batchnorm(self.module) and self.n % batch_size == 1:
            raise ValueError(f"batch_size {batch_size} leaves a last batch of 1 sample, where BatchNorm is undefined")
        self.loss_name = loss if isinstance(loss, str) else getattr(loss, "__name__", "callable")
        self.loss_kind = loss if isinstance(loss, str) else "custom"  # what the loss is, whatever its name
        self._per_sample = _per_sample_loss(loss)
        self.batch_size = batch_size
        self.dtype = dtype
        names, params = zip(*self.module.named_parameters(), strict=True)
        shapes = tuple(p.shape for p in params)
        offsets = tuple(int(x) for x in np.cumsum([0] + [p.numel() for p in params]))
        self.layout = _ParamLayout(tuple(names), shapes, offsets)
        self.theta = torch.cat([p.detach().reshape(-1) for p in params]).clone()
        self._hvp_cache: _GradientGraph | None = None

    # ------------------------------------------------------------------ layout
    @property
    def inputs(self) -> torch.Tensor:
        """The inputs x_i (read-only: build a new Objective, or use ``subset``, for other data)."""
        return self._inputs

    @property
    def targets(self) -> torch.Tensor:
        """The targets y_i (read-only)."""
        return self._targets

    @property
    def n(self) -> int:
        """Number of samples."""
        return int(self._inputs.shape[0])

    @property
    def num_params(self) -> int:
        """P, the length of the flat parameter vector."""
        return self.layout.size

    def param_slice(self, name: str) -> slice:
        """The slice of the flat vector that holds parameter ``name``."""
        i = self.layout.names.index(name)
        return slice(self.layout.offsets[i], self.layout.offsets[i + 1])

    def unflatten(self, theta: torch.Tensor) -> dict[str, torch.Tensor]:
        """Views of ``theta`` shaped like the model's parameters, by name."""
        off = self.layout.offsets
        return {
            name: theta[off[i] : off[i + 1]].view(shape)
            for i, (name, shape) in enumerate(zip(self.layout.names, self.layout.shapes, strict=True))
        }

    def with_params(self, theta: torch.Tensor) -> Objective:
        """The same objective, with ``theta`` as its reference point ``self.theta``."""
        other = copy.copy(self)
        other.theta = torch.as_tensor(theta, dtype=self.dtype).detach().clone()
        other._hvp_cache = None
        return other

    def subset(self, index: torch.Tensor) -> Objective:
        """The same objective on the samples ``index`` only, at the same θ."""
        other = copy.copy(self)
        other._inputs, other._targets = self._inputs[index], self._targets[index]
        other._hvp_cache = None
        return other

    def to_module(self, theta: torch.Tensor | None = None) -> nn.Module:
        """A fresh copy of the model with parameters ``theta`` (default ``self.theta``)."""
        theta = self.theta if theta is None else theta
        module = copy.deepcopy(self.module)
        with torch.no_grad():
            for name, value in self.unflatten(theta).items():
                module.get_parameter(name).copy_(value)
        return module

    # ------------------------------------------------------------------ values
    def _batches(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        if self.batch_size is None:
            yield self.inputs, self.targets
            return
        for start in range(0, self.n, self.batch_size):
            yield (
                self.inputs[start : start + self.batch_size],
                self.targets[start : start + self.batch_size],
            )

    def forward(self, theta: torch.Tensor | None = None, inputs: torch.Tensor | None = None) -> torch.Tensor:
        """Model outputs ``f_θ(x)`` on ``inputs`` (default: the training inputs, as one batch)."""
        theta = self.theta if theta is None else theta
        x = self.inputs if inputs is None else torch.as_tensor(inputs).to(self.dtype)
        return functional_call(self.module, self.unflatten(theta), (x,))

    def per_sample_losses(self, theta: torch.Tensor | None = None) -> torch.Tensor:
        """ℓ_i(θ) for every sample, evaluated batch by batch (shape (n,))."""
        theta = self.theta if theta is None else theta
        params = self.unflatten(theta)
        parts = [self._per_sample(functional_call(self.module, params, (xb,)), yb) for xb, yb in self._batches()]
        return torch.cat(parts)

    def loss(self, theta: torch.Tensor | None = None) -> torch.Tensor:
        """L(θ) as a 0-d tensor (differentiable in ``theta``)."""
        theta = self.theta if theta is None else theta
        params = self.unflatten(theta)
        batch_losses = [
            self._per_sample(functional_call(self.module, params, (xb,)), yb).mean() for xb, yb in self._batches()
        ]
        return torch.stack(batch_losses).mean()

    def error(self, theta: torch.Tensor | None = None) -> float:
        """Training 0-1 error: argmax for several outputs, sign agreement for one output."""
        with torch.no_grad():
            out = self.forward(theta)
        return zero_one_error(out, self.targets)

    def grad(self, theta: torch.Tensor | None = None) -> torch.Tensor:
        """∇_θ L(θ) (shape (P,))."""
        theta = (self.theta if theta is None else theta).detach().clone().requires_grad_(True)
        (g,) = torch.autograd.grad(self.loss(theta), theta)
        return g.detach()

    def loss_and_grad(self, theta: torch.Tensor) -> tuple[float, torch.Tensor]:
        """(L(θ), ∇L(θ)) from one forward and one backward pass."""
        theta = theta.detach().clone().requires_grad_(True)
        value = self.loss(theta)
        (g,) = torch.autograd.grad(value, theta)
        return float(value.detach()), g.detach()

    # ------------------------------------------------------------------ curvature
    def _gradient_graph(self, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        cache = self._hvp_cache
        if cache is not None and cache.matches(theta):
            return cache.leaf, cache.grad
        leaf = theta.detach().clone().requires_grad_(True)
        (g,) = torch.autograd.grad(self.loss(leaf), leaf, create_graph=True)
        self._hvp_cache = _GradientGraph(theta.detach().clone(), leaf, g)
        return leaf, g

    def hvp(self, v: torch.Tensor, theta: torch.Tensor | None = None) -> torch.Tensor:
        """Hessian-vector product ``∇²L(θ) v``; ``v`` of shape (P,) or (k, P) for k products.

        The gradient graph at θ is built once and reused for every later product at the same θ.
        """
        theta = self.theta if theta is None else theta
        leaf, g = self._gradient_graph(theta)
        v = torch.as_tensor(v, dtype=self.dtype)
        if v.ndim == 1:
            (hv,) = torch.autograd.grad(g, leaf, v, retain_graph=True)
            return hv.detach()
        return torch.stack([torch.autograd.grad(g, leaf, vi, retain_graph=True)[0] for vi in v]).detach()

    def hessian(self, theta: torch.Tensor | None = None) -> torch.Tensor:
        """The dense Hessian ∇²L(θ) (P × P) from P Hessian-vector products, symmetrized.

        The symmetrization ``(H + Hᵀ)/2`` only removes round-off; tests check the raw asymmetry.
        """
        h = self.hvp(torch.eye(self.num_params, dtype=self.dtype), theta)
        return (h + h.T) / 2

    def linear_operator(self, theta: torch.Tensor | None = None) -> LinearOperator:
        """The Hessian at θ as a scipy ``LinearOperator`` on float64 numpy vectors."""
        theta = self.theta if theta is None else theta
        p = self.num_params

        def matvec(x: np.ndarray) -> np.ndarray:
            v = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float64).reshape(-1)).to(self.dtype)
            return self.hvp(v, theta).numpy().astype(np.float64)

        return LinearOperator((p, p), matvec=matvec, rmatvec=matvec, dtype=np.float64)

    def parameter_groups(self) -> dict[str, Sequence[str]]:
        """Parameter names split into ``weights`` (≥ 2-d) and ``biases`` (1-d)."""
        weights = [n for n, s in zip(self.layout.names, self.layout.shapes, strict=True) if len(s) >= 2]
        biases = [n for n, s in zip(self.layout.names, self.layout.shapes, strict=True) if len(s) < 2]
        return {"weights": weights, "biases": biases}


def zero_one_error(output: torch.Tensor, targets: torch.Tensor) -> float:
    """0-1 error: argmax for several outputs (targets as indices or one-hot), else P(y f(x) ≤ 0).

    NaN when any output is non-finite: a diverged model's error is undefined, never counted as correct.
    """
    output = output.detach()
    if not bool(torch.isfinite(output).all()):
        return float("nan")
    if output.ndim == 2 and output.shape[1] > 1:
        labels = targets if targets.ndim == 1 else targets.argmax(dim=1)
        return float((output.argmax(dim=1) != labels).double().mean())
    return float((output.reshape(-1) * targets.reshape(-1) <= 0).double().mean())


def _has_batchnorm(module: nn.Module) -> bool:
    return any(isinstance(m, _BATCHNORM) for m in module.modules())


def _per_sample_loss(loss) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    if callable(loss):
        return loss
    if loss == "mse":
        return _mse_per_sample
    if loss == "cross_entropy":
        return _cross_entropy_per_sample
    raise ValueError(f"loss must be 'mse', 'cross_entropy' or a callable, got {loss!r}")


def _private_copy(model: nn.Module, dtype: torch.dtype) -> nn.Module:
    module = copy.deepcopy(model).to(dtype)
    module.eval()
    for m in module.modules():
        if isinstance(m, _BATCHNORM):
            m.train()  # batch statistics of the evaluated batch, never the running ones
            m.track_running_stats = False  # and no running-statistics updates on the private copy
    for p in module.parameters():
        p.requires_grad_(False)
    return module
