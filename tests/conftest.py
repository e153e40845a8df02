"""Shared fixtures: one global seed for every test (scikit-learn style)."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

import catalogue  # noqa: F401  (pins the CPU kernel paths before torch loads: catalogue.kernels)

TEST_SEED = int(os.environ.get("CATALOGUE_TEST_SEED", "0"))


@pytest.fixture(autouse=True)
def global_seed():
    """Seed torch and numpy's legacy global state before every test."""
    torch.manual_seed(TEST_SEED)
    np.random.seed(TEST_SEED)
    yield TEST_SEED


@pytest.fixture
def rng(global_seed) -> np.random.Generator:
    return np.random.default_rng(global_seed)


@pytest.fixture
def gen(global_seed) -> torch.Generator:
    return torch.Generator().manual_seed(global_seed)
