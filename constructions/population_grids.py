"""The populations the ``benchmark`` family scores: grids of training hyperparameters over three model families.

Every grid crosses training hyperparameters with data axes (:data:`DATA_AXES`), so each cell of
the data axes is a population on fixed data. Full mode: 256 models per seed (digits MLPs 128, Wen
et al.'s XOR nets 64, multi-index nets 64); quick mode: 12 per population.
Members are built by :class:`constructions.populations.Population`.
"""

from __future__ import annotations

from constructions.populations import DigitsModel, MultiIndexModel, Population, XorModel

__all__ = ["DATA_AXES", "FULL_POPULATIONS", "QUICK_POPULATIONS", "data_axes"]

DATA_AXES = ("n", "n_train", "label_noise", "noise")
"""Member fields that change the training data (its size or its labels). Jiang et al. 2020 and
Andriushchenko et al. 2023 vary optimization and architecture on fixed data; a grid that also
varies these is scored on each data cell separately, and these axes are reported on their own."""


def data_axes(population: Population) -> tuple[str, ...]:
    """The population's grid axes that change its training data, in grid order."""
    return tuple(h for h in population.hyperparameters if h in DATA_AXES)


FULL_POPULATIONS: dict[str, Population] = {
    "digits": Population(
        base=DigitsModel(n_train=300, max_epochs=2000, target_loss=0.1),
        grid={
            "width": (32, 64),
            "depth": (1, 2),
            "lr": (0.1, 0.2),
            "batch_size": (32, 128),
            "weight_decay": (0.0, 5e-4),
            "sam_rho": (0.0, 0.05),
            "label_noise": (0.0, 0.05),
        },
    ),
    "xor": Population(
        base=XorModel(d=30, max_epochs=2000, n_test=2000),
        grid={
            "bias": (False, True),
            "width": (50, 200),
            "lr": (0.02, 0.1),
            "batch_size": (8, 32),
            "sam_rho": (0.0, 0.1),
            "n": (100, 300),
        },
    ),
    "multi_index": Population(
        base=MultiIndexModel(d=16, m_star=2, max_epochs=2000, n_test=2000, target_loss=1e-3),
        grid={
            "width": (32, 128),
            "lr": (0.02, 0.1),
            "batch_size": (8, 32),
            "sam_rho": (0.0, 0.05),
            "n": (48, 96),
            "noise": (0.0, 0.3),
        },
    ),
}

QUICK_POPULATIONS: dict[str, Population] = {
    "digits": Population(
        base=DigitsModel(width=32, n_train=100, n_test=300, max_epochs=1000, target_loss=0.1),
        grid={"lr": (0.1, 0.2), "sam_rho": (0.0, 0.05), "label_noise": (0.0, 0.05, 0.1)},
    ),
    "xor": Population(
        base=XorModel(d=10, width=32, batch_size=8, max_epochs=500),
        grid={"bias": (False, True), "lr": (0.05, 0.2), "n": (30, 60, 100)},
    ),
    "multi_index": Population(  # two data cells of six: fixed-data τ needs ≥ 3 models a cell
        base=MultiIndexModel(d=8, n=32, width=32, batch_size=8, lr=0.05, max_epochs=1000, target_loss=1e-3),
        grid={"width": (16, 32, 64), "batch_size": (8, 16), "noise": (0.0, 0.3)},
    ),
}
