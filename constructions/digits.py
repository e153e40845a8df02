"""scikit-learn's ``load_digits`` (shipped with the package, no download) for MLP experiments."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from constructions.data import Dataset
from constructions.nets import mlp
from constructions.specs import DigitsSpec

__all__ = ["DigitsProblem", "build_digits"]


@dataclass(frozen=True)
class DigitsProblem:
    """Train/test split with one-hot targets (MSE), the labels, and an initialized MLP."""

    data: Dataset
    labels: torch.Tensor
    test_labels: torch.Tensor
    corrupted: int
    model: torch.nn.Sequential


def build_digits(spec: DigitsSpec, generator: torch.Generator) -> DigitsProblem:
    """Pixels scaled to [0, 1]; a seeded split; ``label_noise`` of the training labels redrawn at random."""
    from sklearn.datasets import load_digits  # here, not at import: scikit-learn takes ~1 s to import

    digits = load_digits()
    x_all = torch.tensor(digits.data, dtype=torch.float64) / 16.0
    y_all = torch.tensor(digits.target, dtype=torch.long)
    if spec.n_train + spec.n_test > len(y_all):
        raise ValueError(f"n_train + n_test must be ≤ {len(y_all)}")
    perm = torch.randperm(len(y_all), generator=generator)
    train, test = perm[: spec.n_train], perm[spec.n_train : spec.n_train + spec.n_test]
    labels = y_all[train].clone()
    k = round(spec.label_noise * spec.n_train)
    if k:
        labels[:k] = torch.randint(0, 10, (k,), generator=generator)
    eye = torch.eye(10, dtype=torch.float64)
    data = Dataset(x_all[train], eye[labels], x_all[test], eye[y_all[test]])
    model = mlp(64, spec.hidden, 10, bias=spec.bias, generator=generator)
    return DigitsProblem(data, labels, y_all[test], int((labels != y_all[train]).sum()), model)
