"""Data sets of the scenarios: every draw takes an explicit generator."""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["Dataset", "gaussian_inputs", "linear_teacher"]


@dataclass(frozen=True)
class Dataset:
    """Training and (optional) held-out samples."""

    x: torch.Tensor
    y: torch.Tensor
    x_test: torch.Tensor | None = None
    y_test: torch.Tensor | None = None


def gaussian_inputs(n: int, d: int, generator: torch.Generator, *, anisotropic: bool = False) -> torch.Tensor:
    """n rows from N(0, I_d), or N(0, diag(1, 1/2, …, 1/d)) when ``anisotropic``."""
    x = torch.randn(n, d, generator=generator, dtype=torch.float64)
    if anisotropic:
        x = x / torch.arange(1, d + 1, dtype=torch.float64).sqrt()
    return x


def linear_teacher(
    x: torch.Tensor, generator: torch.Generator, *, intercept: float = 0.0, noise: float = 0.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """``y = w*ᵀx + b* + noise·ε`` with ``w* ~ N(0, I/d)``; returns (y, w*)."""
    d = x.shape[1]
    w_star = torch.randn(d, generator=generator, dtype=torch.float64) / d**0.5
    y = x @ w_star + intercept + noise * torch.randn(x.shape[0], generator=generator, dtype=torch.float64)
    return y, w_star
