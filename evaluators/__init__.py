"""Measures of flatness and sharpness, each with an honest error bar.

``evaluators`` imports neither ``constructions`` nor ``catalogue``: every function here takes a
model and data (through :class:`Objective`) and returns an :class:`Estimate`.
"""

from evaluators.estimate import Estimate
from evaluators.interpolation_bounds import (
    LpInterpolation,
    NoInterpolator,
    l2_route_bound,
    min_weighted_lp,
    symmetry_minimized_trace,
)
from evaluators.invariant import (
    fisher_rao_norm,
    pacbayes_flatness,
    parameter_norm,
    path_norm,
    relative_flatness,
    spectral_norm_product,
)
from evaluators.objective import Objective, mse, zero_one_error
from evaluators.population import Distribution, population_loss, squared_error, zero_one_loss
from evaluators.sharpness import adaptive_sharpness, epsilon_sharpness, spherical_sharpness
from evaluators.spectrum import (
    Spectrum,
    hessian_extreme_eigenvalues,
    hessian_spectrum,
    hessian_top_eigenvalue,
    power_iteration,
)
from evaluators.trace import hessian_trace, relu_mlp_gradient_norms, supports_exact_identity

__all__ = [
    "Distribution",
    "Estimate",
    "LpInterpolation",
    "NoInterpolator",
    "Objective",
    "Spectrum",
    "adaptive_sharpness",
    "epsilon_sharpness",
    "fisher_rao_norm",
    "hessian_extreme_eigenvalues",
    "hessian_spectrum",
    "hessian_top_eigenvalue",
    "hessian_trace",
    "l2_route_bound",
    "min_weighted_lp",
    "mse",
    "pacbayes_flatness",
    "parameter_norm",
    "path_norm",
    "population_loss",
    "power_iteration",
    "relative_flatness",
    "relu_mlp_gradient_norms",
    "spectral_norm_product",
    "spherical_sharpness",
    "squared_error",
    "supports_exact_identity",
    "symmetry_minimized_trace",
    "zero_one_error",
    "zero_one_loss",
]
