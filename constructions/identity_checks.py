"""How far a computed quantity is from what an identity predicts, in the form the identity claims report."""

from __future__ import annotations

import torch

__all__ = ["relative_error"]


def relative_error(a: torch.Tensor, b: torch.Tensor) -> float:
    """‖a − b‖ / ‖b‖ (Frobenius); ‖a − b‖ when b = 0."""
    denom = float(b.norm())
    diff = float((a - b).norm())
    return diff / denom if denom > 0 else diff
