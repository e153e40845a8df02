"""A model, data and a loss, seen as a function of one flat parameter vector θ ∈ R^P.

Every evaluator in this package works on an :class:`Objective`. It holds a private copy of the
model (float64 by default, on the model's device), so no evaluator ever mutates the caller's model
(parameters, BatchNorm running statistics or the train/eval flag), and repeated calls give
identical results. The data are either one ``(inputs, targets)`` pair of tensors or any
re-iterable of batches, such as a ``torch.utils.data.DataLoader``; batches are then streamed, so
the memory of a gradient or a Hessian-vector product is that of one batch.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from scipy.sparse.linalg import LinearOperator
from torch import nn
from torch.func import functional_call
from torch.utils.data import RandomSampler

__all__ = ["DENSE_HESSIAN_MAX_PARAMS", "Objective", "LossName", "mse", "zero_one_error"]

LossName = str  # "mse" | "cross_entropy"
Batch = tuple[torch.Tensor, torch.Tensor]

_BATCHNORM = (nn.modules.batchnorm._BatchNorm,)
DENSE_HESSIAN_MAX_PARAMS = 5000  # a dense P × P float64 Hessian of 200 MB; above it, only on request


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
    """``L(θ)`` for a fixed model, data and loss, with gradients and Hessian-vector products.

    The loss conventions follow the seed papers:

    * ``loss="mse"``: ``L(θ) = (1/n) Σ_i ‖f_θ(x_i) − y_i‖²`` (mean over samples, sum over outputs,
      no factor ½);
    * ``loss="cross_entropy"``: ``L(θ) = (1/n) Σ_i −log softmax(f_θ(x_i))_{y_i}``;
    * a callable ``loss(output, target) -> per-sample losses (shape (b,))``, e.g.
      ``nn.CrossEntropyLoss(reduction="none")``; its targets are passed through unchanged (only
      moved to the device), where "mse" casts them to ``dtype`` and "cross_entropy" to ``long``.

    **Data.** ``data`` is an ``(inputs, targets)`` pair of tensors, or any re-iterable of
    ``(inputs, targets)`` batches (a ``DataLoader``, a list). Over batches ``B_1, …, B_m`` the loss
    is the sample-weighted mean ``L(θ) = (1/n) Σ_b Σ_{i∈B_b} ℓ_i(θ)`` with ``n = Σ_b |B_b|``, so
    without BatchNorm it does not depend on how the data are batched. A pair with ``batch_size``
    is cut into consecutive, unshuffled batches of that size. Every pass over a loader must give
    the same L: a shuffled loader is refused where BatchNorm normalizes by batch, or where it
    also drops its last batch. A single full batch keeps the
    gradient's autograd graph between Hessian-vector products at the same θ (the fast path for data
    that fit); batched data are streamed: gradients and products are accumulated batch by batch,
    so peak memory is one batch's double backward whatever n is.

    **BatchNorm.** ``batchnorm="batch"`` (default): every BatchNorm layer normalizes with the
    statistics of the batch the loss is evaluated on (train-mode normalization, so ``L`` depends on
    the batching), whatever the caller's model flag is. ``batchnorm="running"``: the deployed
    model, normalized by the running statistics it carries (eval mode). Every other module is
    evaluated in eval mode (no dropout noise), so ``L`` is a deterministic function of θ.

    Hessian-vector products use double backward through autograd: ``H v = ∇_θ ⟨∇_θ L(θ), v⟩``.
    This is right through train-mode BatchNorm, where ``torch.func`` transforms are not
    (pytorch#85533).

    Args:
        model: a ``torch.nn.Module``; it is deep-copied and cast to ``dtype`` on ``device``.
        data: ``(inputs, targets)`` tensors (first dimension n), or a re-iterable of such batches.
        loss: ``"mse"``, ``"cross_entropy"`` or a callable returning per-sample losses.
        batch_size: cut a tensor pair into batches of this size (see above).
        device: where θ, vectors and batches live (default: the model's device).
        dtype: floating point type of the copy (default float64, for the certified checks; with
            float32, estimates say so and widen their errors).
        params: names of the parameters that make up θ (default: all); the others stay fixed.
        batchnorm: ``"batch"`` or ``"running"`` statistics (see above).
    """

    def __init__(
        self,
        model: nn.Module,
        data: tuple[torch.Tensor, torch.Tensor] | Iterable[Batch],
        loss: LossName | Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = "mse",
        *,
        batch_size: int | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        params: Sequence[str] | None = None,
        batchnorm: str = "batch",
    ) -> None:
        self.dtype = torch.float64 if dtype is None else dtype
        if not self.dtype.is_floating_point:
            raise ValueError(f"dtype must be a floating point type, got {self.dtype}")
        self.device = torch.device(device) if device is not None else _device_of(model)
        if batchnorm not in ("batch", "running"):
            raise ValueError(f"batchnorm must be 'batch' or 'running', got {batchnorm!r}")
        self.batchnorm = batchnorm
        self.module = _private_copy(model, self.dtype, self.device, batchnorm)
        self.loss_name = loss if isinstance(loss, str) else getattr(loss, "__name__", type(loss).__name__)
        self.loss_kind = loss if isinstance(loss, str) else "custom"  # what the loss is, whatever its name
        self._per_sample = _per_sample_loss(loss)
        if batch_size is not None and batch_size < 1:
            raise ValueError(f"batch_size must be ≥ 1, got {batch_size}")
        self.batch_size = batch_size
        self._loader: Iterable[Batch] | None = None
        self._inputs = self._targets = None
        self._n: int | None = None
        if _is_tensor_pair(data):
            self._inputs, self._targets = self._placed(*data)
            if self._inputs.shape[0] != self._targets.shape[0]:
                raise ValueError(
                    f"inputs and targets disagree on n: {self._inputs.shape[0]} vs {self._targets.shape[0]}"
                )
            self._n = int(self._inputs.shape[0])
            if batch_size is not None and self._couples_samples() and self._n % batch_size == 1:
                raise ValueError(
                    f"batch_size {batch_size} leaves a last batch of 1 sample, where BatchNorm is undefined"
                )
        else:
            if isinstance(data, Iterator):
                raise TypeError(
                    "data is an iterator, which can be read only once: pass a DataLoader or a list of batches"
                )
            if batch_size is not None:
                raise ValueError("batch_size cuts a tensor pair; a loader brings its own batches")
            _check_loader_order(data, self._couples_samples())
            self._loader = data
        names = tuple(name for name, _ in self.module.named_parameters())
        chosen = names if params is None else tuple(params)
        unknown = sorted(set(chosen) - set(names))
        if unknown or not chosen:
            raise ValueError(f"params must name parameters of the model, got unknown {unknown} (known: {list(names)})")
        repeated = sorted({name for name in chosen if chosen.count(name) > 1})
        if repeated:
            raise ValueError(f"params names {repeated} more than once: each parameter is one block of θ")
        tensors = [self.module.get_parameter(name) for name in chosen]
        offsets = tuple(int(x) for x in np.cumsum([0] + [p.numel() for p in tensors]))
        self.layout = _ParamLayout(chosen, tuple(p.shape for p in tensors), offsets)
        self.theta = torch.cat([p.detach().reshape(-1) for p in tensors]).clone()
        self._hvp_cache: _GradientGraph | None = None

    def _placed(self, inputs, targets) -> Batch:
        """A batch on the objective's device: inputs in ``dtype``, targets as the loss needs them."""
        x = torch.as_tensor(inputs).to(device=self.device, dtype=self.dtype)
        y = torch.as_tensor(targets).to(self.device)
        if self.loss_kind == "cross_entropy":
            y = y.long()
        elif self.loss_kind == "mse":
            y = y.to(self.dtype)
        return x, y

    def _couples_samples(self) -> bool:
        return self.batchnorm == "batch" and _has_batchnorm(self.module)

    # ------------------------------------------------------------------ layout
    @property
    def streamed(self) -> bool:
        """True when gradients and products are accumulated batch by batch (batched data)."""
        return self._loader is not None or self.batch_size is not None

    @property
    def inputs(self) -> torch.Tensor:
        """The inputs x_i (read-only: build a new Objective, or use ``subset``, for other data)."""
        return self._tensors()[0]

    @property
    def targets(self) -> torch.Tensor:
        """The targets y_i (read-only)."""
        return self._tensors()[1]

    def _tensors(self) -> Batch:
        if self._loader is not None:
            raise ValueError("this objective streams its data from a loader: it has no single inputs/targets tensor")
        return self._inputs, self._targets

    @property
    def n(self) -> int:
        """Number of samples (for a loader, counted on the first pass over it)."""
        if self._n is None:
            self._n = sum(int(xb.shape[0]) for xb, _ in self._loader)
        return self._n

    @property
    def num_params(self) -> int:
        """P, the length of the flat parameter vector."""
        return self.layout.size

    def param_slice(self, name: str) -> slice:
        """The slice of the flat vector that holds parameter ``name``."""
        i = self.layout.names.index(name)
        return slice(self.layout.offsets[i], self.layout.offsets[i + 1])

    def unflatten(self, theta: torch.Tensor) -> dict[str, torch.Tensor]:
        """Views of ``theta`` shaped like the model's parameters in θ, by name."""
        off = self.layout.offsets
        return {
            name: theta[off[i] : off[i + 1]].view(shape)
            for i, (name, shape) in enumerate(zip(self.layout.names, self.layout.shapes, strict=True))
        }

    def with_params(self, theta: torch.Tensor) -> Objective:
        """The same objective, with ``theta`` as its reference point ``self.theta``."""
        other = copy.copy(self)
        other.theta = self.vector(theta).detach().clone()
        other._hvp_cache = None
        return other

    def in_dtype(self, dtype: torch.dtype) -> Objective:
        """The same objective computed in another floating point type (its own copy of the model)."""
        if dtype == self.dtype:
            return self
        other = copy.copy(self)
        other.dtype = dtype
        other.module = copy.deepcopy(self.module).to(dtype)
        if self._loader is None:
            other._inputs, other._targets = other._placed(self._inputs, self._targets)
        other.theta = other.vector(self.theta)
        other._hvp_cache = None
        return other

    def float64_product(self, product: Callable) -> Callable:
        """``product`` (this objective's ``hvp`` or ``ggn_vp``) on a float64 copy of it: the
        reference a lower-precision result is checked against."""
        twin = self.in_dtype(torch.float64)
        if product == self.hvp:
            return twin.hvp
        if product == self.ggn_vp:
            return twin.ggn_vp
        raise ValueError(  # a product we cannot rebuild in float64 would check another matrix
            "a lower-precision result is checked by its product in float64, which exists only for "
            "obj.hvp and obj.ggn_vp: build the objective with dtype=torch.float64 for a custom product"
        )

    def subset(self, index: torch.Tensor) -> Objective:
        """The same objective on the samples ``index`` only, at the same θ (tensor data)."""
        x, y = self._tensors()
        other = copy.copy(self)
        other._inputs, other._targets = x[index], y[index]
        other._n = int(other._inputs.shape[0])
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

    def vector(self, v) -> torch.Tensor:
        """``v`` (a tensor or an array) as a vector of this objective: its dtype, on its device."""
        return torch.as_tensor(v).to(device=self.device, dtype=self.dtype)

    # ------------------------------------------------------------------ values
    def batches(self) -> Iterator[Batch]:
        """The batches the loss is the sample-weighted mean over, on the device."""
        if self._loader is not None:
            for batch in self._loader:
                xb, yb = self._placed(*_pair(batch))
                if xb.shape[0] == 1 and self._couples_samples():
                    raise ValueError("the loader gave a batch of 1 sample, where BatchNorm is undefined")
                yield xb, yb
            return
        if self.batch_size is None:
            yield self._inputs, self._targets
            return
        for start in range(0, self.n, self.batch_size):
            yield self._inputs[start : start + self.batch_size], self._targets[start : start + self.batch_size]

    def _batch_losses(self, params: dict[str, torch.Tensor], xb: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
        return self._sample_losses(functional_call(self.module, params, (xb,)), yb)

    def _sample_losses(self, output: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
        """ℓ_i for a batch's outputs, checked to be one value per sample (a batch mean would
        silently scale every derivative by 1/|B|)."""
        losses = self._per_sample(output, yb)
        if losses.shape != (output.shape[0],):
            raise ValueError(
                f"the loss must return one value per sample, shape ({output.shape[0]},), got {tuple(losses.shape)}; "
                "use reduction='none' and reduce over outputs"
            )
        return losses

    def forward(self, theta: torch.Tensor | None = None, inputs: torch.Tensor | None = None) -> torch.Tensor:
        """Model outputs ``f_θ(x)`` on ``inputs`` (default: the training inputs, as one batch)."""
        theta = self.theta if theta is None else theta
        x = self.inputs if inputs is None else torch.as_tensor(inputs).to(device=self.device, dtype=self.dtype)
        return functional_call(self.module, self.unflatten(theta), (x,))

    def per_batch_losses(self, theta: torch.Tensor | None = None) -> Iterator[torch.Tensor]:
        """ℓ_i(θ) for the samples of each batch in turn, differentiable in ``theta``: a derivative
        taken and dropped per batch keeps one batch's graph in memory."""
        theta = self.theta if theta is None else theta
        params = self.unflatten(theta)
        for xb, yb in self.batches():
            yield self._batch_losses(params, xb, yb)

    def per_sample_losses(self, theta: torch.Tensor | None = None) -> torch.Tensor:
        """ℓ_i(θ) for every sample, evaluated batch by batch (shape (n,))."""
        return torch.cat(list(self.per_batch_losses(theta)))

    def loss(self, theta: torch.Tensor | None = None) -> torch.Tensor:
        """L(θ) as a 0-d tensor, differentiable in ``theta`` (over a loader it holds every batch's
        graph: use :meth:`grad` and :meth:`hvp` for derivatives of streamed data)."""
        theta = self.theta if theta is None else theta
        params = self.unflatten(theta)
        if not self.streamed:
            return self._batch_losses(params, self._inputs, self._targets).mean()
        return sum(self._batch_losses(params, xb, yb).sum() for xb, yb in self.batches()) / self.n

    def error(self, theta: torch.Tensor | None = None) -> float:
        """Training 0-1 error: argmax for several outputs, sign agreement for one output."""
        with torch.no_grad():
            if self._loader is None:
                return zero_one_error(self.forward(theta), self._targets)
            params = self.unflatten(self.theta if theta is None else theta)
            parts = [
                (zero_one_error(functional_call(self.module, params, (xb,)), yb), xb.shape[0])
                for xb, yb in self.batches()
            ]
        return sum(e * b for e, b in parts) / sum(b for _, b in parts)

    def grad(self, theta: torch.Tensor | None = None) -> torch.Tensor:
        """∇_θ L(θ) (shape (P,))."""
        return self.loss_and_grad(self.theta if theta is None else theta)[1]

    def loss_and_grad(self, theta: torch.Tensor) -> tuple[float, torch.Tensor]:
        """(L(θ), ∇L(θ)): one forward and one backward pass (per batch, when streamed)."""
        if not self.streamed:
            leaf = theta.detach().clone().requires_grad_(True)
            value = self.loss(leaf)
            (g,) = torch.autograd.grad(value, leaf)
            return float(value.detach()), g.detach()
        total, grad = 0.0, torch.zeros_like(self.theta)
        for params, leaf, xb, yb in self._streamed(theta):
            value = self._batch_losses(params, xb, yb).sum()
            grad += torch.autograd.grad(value, leaf)[0]
            total += float(value.detach())
        return total / self.n, grad / self.n

    def _streamed(self, theta: torch.Tensor) -> Iterator[tuple[dict, torch.Tensor, torch.Tensor, torch.Tensor]]:
        """Per batch: a fresh leaf at θ, its parameter views, and the batch."""
        for xb, yb in self.batches():
            leaf = theta.detach().clone().requires_grad_(True)
            yield self.unflatten(leaf), leaf, xb, yb

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

        One full batch: the gradient graph at θ is built once and reused for every later product
        at the same θ. Streamed: ``H v = (1/n) Σ_b ∇_θ ⟨∇_θ Σ_{i∈B_b} ℓ_i, v⟩``, one double
        backward per batch and product.
        """
        theta = self.theta if theta is None else self.vector(theta)
        v = self.vector(v)
        rows = v.reshape(-1, self.num_params)
        if self.streamed:
            out = torch.zeros_like(rows)
            for params, leaf, xb, yb in self._streamed(theta):
                (g,) = torch.autograd.grad(self._batch_losses(params, xb, yb).sum(), leaf, create_graph=True)
                for i, vi in enumerate(rows):
                    out[i] += torch.autograd.grad(g, leaf, vi, retain_graph=True)[0]
                del g  # this batch's graph goes before the next batch's is built
            return (out / self.n).reshape(v.shape)
        leaf, g = self._gradient_graph(theta)
        if v.ndim == 1:
            (hv,) = torch.autograd.grad(g, leaf, v, retain_graph=True)
            return hv.detach()
        return torch.stack([torch.autograd.grad(g, leaf, vi, retain_graph=True)[0] for vi in v]).detach()

    def ggn_vp(self, v: torch.Tensor, theta: torch.Tensor | None = None) -> torch.Tensor:
        """Generalized Gauss–Newton product ``G v = (1/n) Σ_i J_iᵀ ∇²_f ℓ_i J_i v`` (Schraudolph 2002).

        ``J_i = ∂f(x_i)/∂θ``; ``J v`` comes from the double-vjp trick (``u ↦ Jᵀu`` is linear, and
        its derivative in u along v is ``J v``), ``∇²_f ℓ`` from autograd on the outputs, so any
        per-sample loss works. G is the Hessian without the term of the residuals' curvature;
        ``G ⪰ 0`` for convex losses; ``G = 0`` for a loss linear in f. ``v`` of shape (P,) or (k, P).
        """
        theta = self.theta if theta is None else self.vector(theta)
        v = self.vector(v)
        rows = v.reshape(-1, self.num_params)
        out = torch.zeros_like(rows)
        for params, leaf, xb, yb in self._streamed(theta):
            f = functional_call(self.module, params, (xb,))
            (dl_df,) = torch.autograd.grad(self._sample_losses(f, yb).sum(), f, create_graph=True)
            if not dl_df.requires_grad:  # ∇_f ℓ does not depend on f: ∇²_f ℓ = 0
                continue
            dummy = torch.zeros_like(f, requires_grad=True)
            (jt_dummy,) = torch.autograd.grad(f, leaf, dummy, create_graph=True)
            for i, vi in enumerate(rows):
                (jv,) = torch.autograd.grad(jt_dummy, dummy, vi, retain_graph=True)
                (hjv,) = torch.autograd.grad(dl_df, f, jv, retain_graph=True)
                out[i] += torch.autograd.grad(f, leaf, hjv, retain_graph=True)[0]
            del f, dl_df, jt_dummy  # this batch's graph goes before the next batch's is built
        return (out / self.n).reshape(v.shape)

    def hessian(self, theta: torch.Tensor | None = None, *, max_params: int = DENSE_HESSIAN_MAX_PARAMS) -> torch.Tensor:
        """The dense Hessian ∇²L(θ) (P × P) from P Hessian-vector products, symmetrized.

        The symmetrization ``(H + Hᵀ)/2`` only removes round-off; tests check the raw asymmetry.
        Above ``max_params`` parameters it refuses (P² numbers and P products): raise the limit to
        ask for it anyway.
        """
        if self.num_params > max_params:
            raise ValueError(
                f"a dense Hessian of P = {self.num_params} parameters holds {self.num_params**2:.3g} numbers; "
                f"pass max_params={self.num_params} to allocate it anyway, or use Hessian-vector products"
            )
        h = self.hvp(torch.eye(self.num_params, dtype=self.dtype, device=self.device), theta)
        return (h + h.T) / 2

    def linear_operator(self, theta: torch.Tensor | None = None) -> LinearOperator:
        """The Hessian at θ as a scipy ``LinearOperator`` on float64 numpy vectors (CPU: the API edge)."""
        theta = self.theta if theta is None else theta
        p = self.num_params

        def matvec(x: np.ndarray) -> np.ndarray:
            v = self.vector(np.ascontiguousarray(x, dtype=np.float64).reshape(-1))
            return self.hvp(v, theta).cpu().numpy().astype(np.float64)

        return LinearOperator((p, p), matvec=matvec, rmatvec=matvec, dtype=np.float64)

    def parameter_groups(self) -> dict[str, Sequence[str]]:
        """Parameter names of θ split into ``weights`` (≥ 2-d) and ``biases`` (1-d)."""
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


def _private_copy(model: nn.Module, dtype: torch.dtype, device: torch.device, batchnorm: str) -> nn.Module:
    module = copy.deepcopy(model).to(device=device, dtype=dtype)
    module.eval()
    for m in module.modules():
        if not isinstance(m, _BATCHNORM):
            continue
        if batchnorm == "batch":
            m.train()  # batch statistics of the evaluated batch, never the running ones
            m.track_running_stats = False  # and no running-statistics updates on the private copy
        elif m.running_mean is None:
            raise ValueError("batchnorm='running' needs BatchNorm layers that track running statistics")
    for p in module.parameters():
        p.requires_grad_(False)
    return module


def _device_of(model: nn.Module) -> torch.device:
    first = next(model.parameters(), None)
    return first.device if first is not None else torch.device("cpu")


def _is_tensor_pair(data) -> bool:
    """An ``(inputs, targets)`` pair: inputs an array, targets an array or a list (of labels).

    A list of two batches is not one: its first item is a batch, not an array."""
    return (
        isinstance(data, tuple | list)
        and len(data) == 2
        and isinstance(data[0], torch.Tensor | np.ndarray)
        and isinstance(data[1], torch.Tensor | np.ndarray | list)
    )


def _check_loader_order(loader, couples_samples: bool) -> None:
    """Refuse a loader whose passes differ in a way that changes L: a shuffled one when BatchNorm
    normalizes by batch (the batches change), or one that shuffles and drops its last batch (the
    samples change). Every evaluator reads the data several times and needs the same L each time."""
    sampler = getattr(loader, "sampler", None)
    if not isinstance(sampler, RandomSampler):
        return
    if couples_samples:
        raise ValueError(
            "the loader shuffles, and BatchNorm normalizes by batch: L would change between passes; "
            "pass shuffle=False, or batchnorm='running' for the deployed model"
        )
    if getattr(loader, "drop_last", False):
        raise ValueError(
            "the loader shuffles and drops its last batch: L would change between passes; pass shuffle=False"
        )


def _pair(batch) -> Batch:
    if isinstance(batch, tuple | list) and len(batch) == 2:
        return batch[0], batch[1]
    raise TypeError(f"each batch must be an (inputs, targets) pair, got {type(batch).__name__}")
