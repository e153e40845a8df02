"""Population (test) loss: exact by enumeration on small finite distributions, else Monte Carlo."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

import numpy as np
import torch

from evaluators.estimate import Estimate, Stopwatch, mean_with_stderr

__all__ = ["Distribution", "population_loss", "squared_error", "zero_one_loss"]


@runtime_checkable
class Distribution(Protocol):
    """What :func:`population_loss` needs from a data distribution.

    ``support()`` returns ``(X, Y, probabilities)`` for a finite distribution, or ``None``;
    ``support_size()`` its size without building it (``None`` if infinite);
    ``sample(n, generator)`` draws n i.i.d. pairs ``(X, Y)``.
    """

    def support_size(self) -> int | None: ...

    def support(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None: ...

    def sample(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]: ...


def squared_error(pred: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Per-sample ‖f(x) − y‖² (the MSE convention of the seed papers: sum over outputs, no ½)."""
    d = (pred.reshape(pred.shape[0], -1) - y.reshape(pred.shape[0], -1)) ** 2
    return d.sum(dim=1)


def zero_one_loss(pred: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Per-sample 0-1 loss: ``1[y f(x) ≤ 0]`` for scalar outputs, ``1[argmax f ≠ y]`` otherwise.

    NaN for a sample whose prediction is non-finite (undefined, never counted as correct).
    """
    if pred.ndim == 2 and pred.shape[1] > 1:
        labels = y if y.ndim == 1 else y.argmax(dim=1)
        loss = (pred.argmax(dim=1) != labels).double()
        finite = torch.isfinite(pred).all(dim=1)
    else:
        loss = (pred.reshape(-1) * y.reshape(-1) <= 0).double()
        finite = torch.isfinite(pred.reshape(-1))
    return torch.where(finite, loss, torch.full_like(loss, float("nan")))


def population_loss(
    predict: Callable[[torch.Tensor], torch.Tensor],
    distribution: Distribution,
    *,
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = squared_error,
    samples: int = 100_000,
    max_enumerate: int = 2**16,
    batch: int = 8192,
    seed: int = 0,
) -> Estimate:
    """``E_{(x,y)~D}[loss(f(x), y)]``.

    Exact (``error_kind="exact"``) when the distribution is finite with at most ``max_enumerate``
    points; otherwise the mean of ``samples`` fresh draws with its standard error and a 95%
    Student-t interval.
    """
    size = distribution.support_size()
    with Stopwatch() as sw, torch.no_grad():
        if size is not None and size <= max_enumerate:
            x, y, prob = distribution.support()
            values = torch.cat([loss(predict(xb), yb) for xb, yb in zip(x.split(batch), y.split(batch), strict=True)])
            value = float((values * prob.to(values.dtype)).sum())
            result = (value, 0.0, "exact", None)
        else:
            gen = torch.Generator().manual_seed(seed)
            parts = []
            for start in range(0, samples, batch):
                x, y = distribution.sample(min(batch, samples - start), gen)
                parts.append(loss(predict(x), y).double().cpu().numpy())
            mean, se, ci = mean_with_stderr(np.concatenate(parts))
            result = (mean, se, "stderr", ci)
    value, err, kind, ci = result
    return Estimate(value, err, kind, seconds=sw.seconds, interval=ci, extra={"support_size": size})
