"""Digits nets on fixed data that differ only in how they were optimized (Andriushchenko et al. 2023's protocol).

Every member shares the data draw and the initial weights; only the learning rate, the batch
size and SAM's ρ vary (a full grid). Each is trained by SGD to the same stopping criterion and
measured where Andriushchenko et al. measure: adaptive worst-case ℓ∞ sharpness
``max_{‖δ ⊘ |θ|‖∞ ≤ ρ} L_B(θ + δ) − L_B(θ)`` averaged over training batches B of ``m`` samples
("m-sharpness", ``evaluators.adaptive_sharpness``: a lower bound from 20 sign-ascent steps),
the test error, and the error on the same test digits under additive Gaussian pixel noise (an
out-of-distribution shift in the spirit of CIFAR-10-C's Gaussian noise).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch
from pydantic import Field

from constructions.batch_size import train_variants
from constructions.populations import DigitsModel
from constructions.specs import Grid, IntGrid, NonNegativeFloat, PositiveFloat, PositiveInt, Spec
from evaluators import Objective, adaptive_sharpness, zero_one_error

__all__ = ["HyperparameterGrid", "Member", "SharpnessSettings", "train_and_measure"]


class HyperparameterGrid(Spec):
    """The optimization hyperparameters that vary; everything else is the model's."""

    lrs: Grid = Field(default=(0.1, 0.15, 0.2), description="η = 0.3 does not converge at batch 16 in 20k epochs")
    batch_sizes: IntGrid = (16, 64, 256)
    sam_rhos: tuple[NonNegativeFloat, ...] = Field(default=(0.0, 0.05), min_length=1)

    def variants(self) -> dict[str, dict[str, float]]:
        return {
            f"lr={lr:g} B={b} ρ={r:g}": {"lr": lr, "batch_size": b, "sam_rho": r}
            for lr, b, r in itertools.product(self.lrs, self.batch_sizes, self.sam_rhos)
        }


class SharpnessSettings(Spec):
    """Where the members are measured."""

    rho: PositiveFloat = Field(
        default=0.002, description="adaptive ℓ∞ radius (the authors' code scans 0.001–0.008 for ResNets)"
    )
    batch: PositiveInt = Field(default=128, description="m of m-sharpness (the authors' code's default)")
    steps: PositiveInt = Field(default=20, description="ascent steps per batch (the authors' code: 20 APGD steps)")
    ood_noise: PositiveFloat = Field(
        default=0.37, description="std of the Gaussian pixel noise (pixels in [0, 1], whose own std is 0.376)"
    )


@dataclass(frozen=True)
class Member:
    """One trained net's hyperparameters and measurements."""

    lr: float
    batch_size: int
    sam_rho: float
    epochs: int
    converged: bool
    sharpness: float
    test_error: float
    ood_error: float


def train_and_measure(
    model: DigitsModel,
    grid: HyperparameterGrid,
    settings: SharpnessSettings,
    data_seed: int,
    init_seed: int,
    noise_seed: int,
) -> list[Member]:
    """Every grid point trained from the same data and initial weights, then measured (float64)."""
    variants = grid.variants()
    trained = train_variants(model, variants, data_seed, init_seed)
    first = next(iter(trained.values()))
    # one corruption of the shared test set, the same for every member
    noise = torch.randn(
        first.x_test.shape, generator=torch.Generator().manual_seed(noise_seed), dtype=first.x_test.dtype
    )
    members = []
    for name, run in trained.items():
        obj = Objective(run.model, (run.x, run.y))
        sharpness = adaptive_sharpness(
            obj, settings.rho, norm="linf", kind="worst", scale="abs", batch_size=settings.batch, steps=settings.steps
        )
        with torch.no_grad():
            test_error = zero_one_error(run.model(run.x_test), run.y_test)
            ood_error = zero_one_error(run.model(run.x_test + settings.ood_noise * noise), run.y_test)
        members.append(
            Member(
                lr=variants[name]["lr"],
                batch_size=int(variants[name]["batch_size"]),
                sam_rho=variants[name]["sam_rho"],
                epochs=run.run.epochs,
                converged=run.run.converged,
                sharpness=float(sharpness.value),
                test_error=float(test_error),
                ood_error=float(ood_error),
            )
        )
    return members
