"""A user's measure, scored with ``catalogue score examples/my_measure.py:normalized_lambda_max``.

A measure is ``measure(obj, seed) -> float | Estimate`` (larger = sharper); ``obj`` is an
:class:`evaluators.Objective` (the model, its training data and loss). This one is λ1 normalized by
the mean squared parameter, λ1·‖θ‖²/P, a scale-aware sharpness one might hope survives Dinh et
al.'s T_α; its scorecard shows that it does not (under T_α both factors grow with α²).
"""

from evaluators import Estimate, Objective, hessian_top_eigenvalue


def normalized_lambda_max(obj: Objective, seed: int) -> Estimate:
    """λ1(∇²L) · ‖θ‖² / P, with λ1's residual bound carried through the same factor."""
    top = hessian_top_eigenvalue(obj, rtol=1e-10, seed=seed)
    factor = float(obj.theta.pow(2).sum()) / obj.num_params
    return Estimate(top.value * factor, top.error * factor, top.error_kind)
