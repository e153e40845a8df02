"""The spec base every scenario and claim parameter set derives from, and the scenario union.

Specs are frozen pydantic models that forbid unknown fields and non-finite floats, so a spec is a
complete, hashable description of what a run builds (see ``catalogue.seeding.spec_hash``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "Spec",
    "PositiveInt",
    "PositiveFloat",
    "NonNegativeFloat",
    "Probability",
    "Grid",
    "IntGrid",
    "BNLinearRegressionSpec",
    "MLPRegressionSpec",
    "DigitsSpec",
    "MultiIndexSpec",
    "XorSpec",
    "Scenario",
]

PositiveInt = Annotated[int, Field(ge=1)]
PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegativeFloat = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Probability = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
Grid = Annotated[tuple[PositiveFloat, ...], Field(min_length=1)]  # a non-empty grid of positive values
IntGrid = Annotated[tuple[PositiveInt, ...], Field(min_length=1)]


class Spec(BaseModel):
    """Base of all specs: frozen, no unknown fields, finite floats only."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class BNLinearRegressionSpec(Spec):
    """Lyu, Li, Arora 2022 §5: ``Φ(x; w) = γ (wᵀx − μ1)/σ1 + β`` on a linear teacher.

    Inputs ``x ~ N(0, Σ)`` with Σ = I (``isotropic``) or ``diag(k^{-1})`` (``anisotropic``),
    targets ``y = w*ᵀx + b* + noise·ε`` with ``w* ~ N(0, I/d)``; β = mean(y), γ = std(y).
    """

    kind: Literal["bn_linear_regression"] = "bn_linear_regression"
    n: PositiveInt = 20
    d: PositiveInt = 100
    noise: NonNegativeFloat = 0.0
    intercept: float = Field(default=1.0, allow_inf_nan=False)
    inputs: Literal["isotropic", "anisotropic"] = "isotropic"


class MLPRegressionSpec(Spec):
    """A fully connected net on a synthetic regression task (inputs N(0, I), a random teacher MLP).

    ``hidden`` lists the hidden widths; ``activation`` is ReLU unless said; ``batchnorm`` puts a
    ``BatchNorm1d`` (no affine) after each hidden pre-activation, which makes every weight matrix
    before it scale-invariant; ``layernorm`` does the same with a non-affine LayerNorm.
    """

    kind: Literal["mlp_regression"] = "mlp_regression"
    n: PositiveInt = 32
    d: PositiveInt = 4
    hidden: tuple[PositiveInt, ...] = (8,)
    outputs: PositiveInt = 1
    bias: bool = True
    activation: Literal["relu", "tanh"] = "relu"
    batchnorm: bool = False
    layernorm: bool = False
    noise: NonNegativeFloat = 0.1
    n_test: PositiveInt = 256


class DigitsSpec(Spec):
    """An MLP on scikit-learn's 8×8 digits with MSE on one-hot targets; a fraction of the training
    labels may be replaced by uniformly random ones (``label_noise``)."""

    kind: Literal["digits_mlp"] = "digits_mlp"
    n_train: PositiveInt = 300
    n_test: PositiveInt = 600
    hidden: tuple[PositiveInt, ...] = (128,)
    bias: bool = True
    label_noise: Probability = 0.0


class MultiIndexSpec(Spec):
    """Vardhan, Taheri, Mazumdar 2026: x ~ N(0, I_d), y = σ*(Θ* x) + noise·ε, σ = ReLU^c.

    ``link``: ``single_index`` (y = σ(θ*ᵀx)), ``sum_single_index`` (y = (1/m*) Σ_k σ(θ*_kᵀx),
    teacher-student with the student's activation) or ``product`` (y = (θ*_1ᵀx)(θ*_2ᵀx), a link
    the student cannot represent with finitely many neurons). Θ* has orthonormal rows.
    """

    kind: Literal["multi_index"] = "multi_index"
    n: PositiveInt = 64
    d: PositiveInt = 64
    m_star: PositiveInt = 1
    link: Literal["single_index", "sum_single_index", "product"] = "single_index"
    c: Annotated[int, Field(ge=1, le=4)] = 1
    noise: NonNegativeFloat = 0.0


class XorSpec(Spec):
    """Wen, Li, Ma 2023: x uniform on {−1, 1}^d, y = x[1]·x[2]; n distinct training points."""

    kind: Literal["xor"] = "xor"
    d: Annotated[int, Field(ge=2, le=62)] = 30
    n: PositiveInt = 100


Scenario = Annotated[
    BNLinearRegressionSpec | MLPRegressionSpec | DigitsSpec | MultiIndexSpec | XorSpec, Field(discriminator="kind")
]
