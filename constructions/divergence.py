"""Divergence is an outcome, never a number: trainers stop on non-finite values and say so."""

from __future__ import annotations

import math

import torch

__all__ = ["Diverged", "check_finite"]


class Diverged(FloatingPointError):
    """A training run reached a non-finite loss or weight.

    Attributes:
        step: the step (or epoch) at which the non-finite value was seen.
        last_finite_loss: the last finite training loss logged before it (NaN if none was).
        what: which quantity was non-finite.
    """

    def __init__(self, step: int, last_finite_loss: float, what: str = "loss"):
        self.step, self.last_finite_loss, self.what = step, last_finite_loss, what
        super().__init__(
            f"training diverged at step {step}: non-finite {what} (last finite loss {last_finite_loss:.4g})"
        )


def check_finite(step: int, loss: float, weights: torch.Tensor, last_finite_loss: float) -> float:
    """``loss`` if it and ``weights`` are finite, else raise :class:`Diverged` at ``step``."""
    if not math.isfinite(loss):
        raise Diverged(step, last_finite_loss, "loss")
    if not bool(torch.isfinite(weights).all()):
        raise Diverged(step, last_finite_loss, "weights")
    return loss
