"""Measures of flatness and sharpness, each with an honest error bar.

``evaluators`` imports neither ``constructions`` nor ``catalogue``: every function here takes a
model and data (through :class:`Objective`) and returns an :class:`Estimate`.
"""

from evaluators.density import SpectralDensity, hessian_spectral_density
from evaluators.estimate import Estimate
from evaluators.fisher_rao import fisher_rao_norm
from evaluators.interpolation_bounds import LpInterpolation, NoInterpolator, l2_route_bound, min_weighted_lp
from evaluators.norms import parameter_norm, path_norm, spectral_norm_product
from evaluators.objective import Objective, mse, zero_one_error
from evaluators.pacbayes import pacbayes_flatness
from evaluators.population import Distribution, population_loss, squared_error, zero_one_loss
from evaluators.relative_flatness import relative_flatness
from evaluators.sharpness import adaptive_sharpness, epsilon_sharpness, spherical_sharpness
from evaluators.spectrum import (
    Spectrum,
    gauss_newton_top_eigenvalue,
    hessian_extreme_eigenvalues,
    hessian_spectrum,
    hessian_top_eigenvalue,
    power_iteration,
)
from evaluators.symmetry_minimized import min_trace_over_rescalings, symmetry_minimized_trace
from evaluators.trace import gauss_newton_trace, hessian_trace, relu_mlp_gradient_norms, supports_exact_identity

__all__ = [
    "Distribution",
    "Estimate",
    "LpInterpolation",
    "NoInterpolator",
    "Objective",
    "SpectralDensity",
    "Spectrum",
    "adaptive_sharpness",
    "epsilon_sharpness",
    "fisher_rao_norm",
    "gauss_newton_top_eigenvalue",
    "gauss_newton_trace",
    "hessian_extreme_eigenvalues",
    "hessian_spectral_density",
    "hessian_spectrum",
    "hessian_top_eigenvalue",
    "hessian_trace",
    "l2_route_bound",
    "min_trace_over_rescalings",
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
