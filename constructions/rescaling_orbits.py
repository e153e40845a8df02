"""A trained ReLU net and its rescaled copies (Dinh et al. 2017): what a symmetry moves and what it keeps.

Each experiment trains or takes a net, walks an orbit of :mod:`constructions.symmetries` (the layer
rescaling T_α, per-neuron and deep rescalings, the input reparametrization x → c·x, θ1 → θ1/c) and
returns tidy rows: one dict per point of the orbit, float64 throughout. The block law behind the
trace experiments (docs/derivations.md §2): with D_α = diag(α I, α⁻¹ I, I),

    ∇²L(T_α θ) = D_α⁻¹ ∇²L(θ) D_α⁻¹,   Tr ∇²L(T_α θ) = α⁻² Tr H11 + α² Tr H22 + Tr H_rest,

whose infimum over α is 2√(Tr H11 Tr H22) + Tr H_rest at α⁴ = Tr H11 / Tr H22.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from scipy.optimize import minimize_scalar

import evaluators as ev
from constructions import symmetries
from constructions.digits import build_digits
from constructions.identity_checks import relative_error
from constructions.mlp_regression import build_mlp_regression
from constructions.specs import DigitsSpec, MLPRegressionSpec
from constructions.training import train_lbfgs
from evaluators import Objective

__all__ = [
    "block_law_errors",
    "block_traces",
    "eigenvalue_counts",
    "function_changes",
    "input_scaling_changes",
    "log_grid",
    "rescale_until_sharper",
    "scaling_vector",
    "sharpness_along_orbit",
    "trace_along_orbit",
    "trained_digits",
    "trained_regression",
    "alpha_sweep",
]


def log_grid(lo: float, hi: float, count: int) -> tuple[float, ...]:
    """``np.logspace(lo, hi, count)`` to 12 significant digits: its last bit depends on the machine's
    vector math, and a grid is part of a spec, so unrounded it changed the spec hash between hosts."""
    return tuple(float(f"{a:.12g}") for a in np.logspace(lo, hi, count))


def trained_regression(spec: MLPRegressionSpec, generator: torch.Generator, iterations: int):
    """The regression MLP of ``spec`` fitted by L-BFGS: (model, data, fit)."""
    problem = build_mlp_regression(spec, generator)
    fit = train_lbfgs(problem.model, ev.mse, problem.data.x, problem.data.y, max_iter=iterations)
    return problem.model, problem.data, fit


def trained_digits(spec: DigitsSpec, generator: torch.Generator, iterations: int):
    """The digits MLP of ``spec`` fitted by L-BFGS on MSE to one-hot targets: (problem, fit)."""
    problem = build_digits(spec, generator)
    fit = train_lbfgs(problem.model, ev.mse, problem.data.x, problem.data.y, max_iter=iterations)
    return problem, fit


def scaling_vector(obj: Objective, k: int, alpha: float) -> torch.Tensor:
    """The diagonal D of T_α on hidden layer k as a flat vector: θ_k (weight, bias) ×α, W_{k+1} ×1/α."""
    linear_names = [n for n in obj.layout.names if n.endswith(".weight")]
    d = torch.ones(obj.num_params, dtype=obj.dtype)
    first = linear_names[k].rsplit(".", 1)[0]
    d[obj.param_slice(f"{first}.weight")] = alpha
    if f"{first}.bias" in obj.layout.names:
        d[obj.param_slice(f"{first}.bias")] = alpha
    d[obj.param_slice(linear_names[k + 1])] = 1 / alpha
    return d


def block_traces(hessian: torch.Tensor, d: torch.Tensor) -> tuple[float, float, float]:
    """(Tr H11, Tr H22, Tr rest) for the blocks the diagonal rescaling D scales up, down and not at all."""
    diag = torch.diagonal(hessian)
    up, down = d > 1, d < 1
    return float(diag[up].sum()), float(diag[down].sum()), float(diag[~(up | down)].sum())


def function_changes(net, data, alphas: Sequence[float], generator: torch.Generator) -> list[dict]:
    """T_α, a random per-neuron rescaling (exponents uniform in [−1, 1]) and a deep rescaling with
    Π α_k = 1 at each α: the largest output change max|f' − f| / max|f| on train and test inputs and
    the loss change |ΔL| / (L + mean‖f‖²), relative to the energy because at an interpolating minimum
    L itself is ~0 and a round-off change of f would look like a large relative change of L."""
    x_all = torch.cat([data.x, data.x_test])
    with torch.no_grad():
        ref = net(x_all)
        scale = float(ref.abs().max())
        ref_losses = (ev.mse(net(data.x), data.y), ev.mse(net(data.x_test), data.y_test))
    energy = float((ref**2).sum(dim=1).mean())
    n_layers = len(symmetries.linear_layers(net))
    rows = []
    for alpha in alphas:
        width = symmetries.linear_layers(net)[0].out_features
        exps = torch.rand(width, generator=generator, dtype=torch.float64) * 2 - 1
        deep = np.exp(np.log(alpha) * np.linspace(1, -1, n_layers))  # Π = 1
        variants = {
            "T_alpha": symmetries.layer_rescale(net, 0, alpha),
            "per_neuron": symmetries.neuron_rescale(net, 0, alpha**exps),
            "deep": symmetries.deep_rescale(net, deep.tolist()),
        }
        for kind, moved in variants.items():
            with torch.no_grad():
                out_err = float((moved(x_all) - ref).abs().max()) / scale
                losses = (ev.mse(moved(data.x), data.y), ev.mse(moved(data.x_test), data.y_test))
            loss_err = max(abs(float(a - b)) / (float(b) + energy) for a, b in zip(losses, ref_losses, strict=True))
            rows.append({"rescaling": kind, "alpha": alpha, "output_change": out_err, "loss_change": loss_err})
    return rows


def block_law_errors(net, data, alphas: Sequence[float]) -> list[dict]:
    """At each α: the dense Hessian of T_α θ against D⁻¹HD⁻¹ and its exact trace against the block law."""
    obj = Objective(net, (data.x, data.y))
    h = obj.hessian()
    t11, t22, rest = block_traces(h, scaling_vector(obj, 0, 2.0))
    rows = []
    for alpha in alphas:
        d = scaling_vector(obj, 0, alpha)
        moved = Objective(symmetries.layer_rescale(net, 0, alpha), (data.x, data.y))
        err_h = relative_error(moved.hessian(), h / d[:, None] / d[None, :])
        tr_pred = t11 / alpha**2 + alpha**2 * t22 + rest
        tr_true = ev.hessian_trace(moved, method="exact").value
        rows.append(
            {
                "alpha": alpha,
                "hessian_error": err_h,
                "trace": tr_true,
                "trace_error": abs(tr_true - tr_pred) / abs(tr_pred),
            }
        )
    return rows


def alpha_sweep(net, data, alphas: Sequence[float], seed: int, *, with_sharpness: bool) -> dict[str, np.ndarray]:
    """λ1 (Lanczos to rtol 1e-12, with its residual), the exact trace, the output change and, with
    ``with_sharpness``, ε- and adaptive sharpness at ε = 1e-3 along T_α, α = 1 always included."""
    base = Objective(net, (data.x, data.y))
    with torch.no_grad():
        ref = base.forward()
    out = {k: [] for k in ("alpha", "lambda_max", "lambda_resid", "lanczos_converged", "trace")}
    out |= {k: [] for k in ("eps_sharpness", "adaptive", "function_change")}
    for alpha in sorted({*alphas, 1.0}):
        obj = Objective(symmetries.layer_rescale(net, 0, alpha), (data.x, data.y))
        lam = ev.hessian_top_eigenvalue(obj, rtol=1e-12, seed=seed)
        out["alpha"].append(alpha)
        out["lambda_max"].append(lam.value)
        out["lambda_resid"].append(lam.error)
        out["lanczos_converged"].append(lam.converged)
        out["trace"].append(ev.hessian_trace(obj, method="exact").value)
        with torch.no_grad():
            out["function_change"].append(float((obj.forward() - ref).abs().max() / ref.abs().max()))
        if with_sharpness:
            out["eps_sharpness"].append(ev.epsilon_sharpness(obj, 1e-3).value)
            out["adaptive"].append(ev.adaptive_sharpness(obj, 1e-3).value)
    return {k: np.array(v) for k, v in out.items()}


def eigenvalue_counts(net, data, alphas: Sequence[float], threshold_multiple: float) -> dict:
    """How many eigenvalues of the rescaled net's own Hessian exceed M = ``threshold_multiple`` · λ1(α = 1)
    at each α, and Thm 5's bound: the rank of the θ2 block (eigenvalues > 1e-10 × its largest)."""
    obj = Objective(net, (data.x, data.y))
    h = obj.hessian()
    m_level = threshold_multiple * float(torch.linalg.eigvalsh(h)[-1])
    d1 = scaling_vector(obj, 0, 2.0)
    ev22 = torch.linalg.eigvalsh(h[d1 < 1][:, d1 < 1])
    rank_bound = int((ev22 > 1e-10 * ev22.max()).sum())
    counts = []
    for alpha in alphas:  # the rescaled net's own Hessian, not the block law applied to h
        h_alpha = Objective(symmetries.layer_rescale(net, 0, alpha), (data.x, data.y)).hessian()
        counts.append(int((torch.linalg.eigvalsh(h_alpha) > m_level).sum()))
    return {"M": m_level, "rank_bound": rank_bound, "counts": counts}


def trace_along_orbit(net, data, alphas: Sequence[float]) -> dict:
    """The block law's infimum of the trace over T_α and where it is, against a bounded scalar search
    (xatol 1e-10 in log α over [10⁻³, 10³]) on the exact trace; the exact trace on the sorted grid."""
    obj = Objective(net, (data.x, data.y))
    t11, t22, rest = block_traces(obj.hessian(), scaling_vector(obj, 0, 2.0))

    def trace_at(log_alpha: float) -> float:
        moved = Objective(symmetries.layer_rescale(net, 0, float(np.exp(log_alpha))), (data.x, data.y))
        return ev.hessian_trace(moved, method="exact").value

    res = minimize_scalar(trace_at, bounds=(np.log(1e-3), np.log(1e3)), method="bounded", options={"xatol": 1e-10})
    grid = sorted(alphas)
    return {
        "predicted_min": 2 * np.sqrt(t11 * t22) + rest,
        "predicted_alpha": (t11 / t22) ** 0.25,
        "found_min": float(res.fun),
        "found_alpha": float(np.exp(res.x)),
        "grid": grid,
        "traces": [trace_at(np.log(a)) for a in grid],
        "trace_at_1": trace_at(0.0),
    }


def sharpness_along_orbit(net, data, alphas: Sequence[float], epsilons: Sequence[float], sharpness: Callable) -> dict:
    """``sharpness(obj, ε).value`` of T_α θ for each ε, over the sorted α grid with α = 1 added."""
    grid = sorted({*alphas, 1.0})
    values = {eps: [] for eps in epsilons}
    for alpha in grid:
        obj = Objective(symmetries.layer_rescale(net, 0, alpha), (data.x, data.y))
        for eps in epsilons:
            values[eps].append(sharpness(obj, eps).value)
    return {"alphas": grid, "values": values}


def _solution_measures(net, problem, seed: int) -> dict[str, float]:
    obj = Objective(net, (problem.data.x, problem.data.y))
    with torch.no_grad():
        test_err = ev.zero_one_error(net(problem.data.x_test), problem.test_labels)  # NaN if it diverged
        train_err = ev.zero_one_error(net(problem.data.x), problem.labels)
    return {
        "lambda_max": ev.hessian_top_eigenvalue(obj, rtol=1e-10, seed=seed).value,
        "trace": ev.hessian_trace(obj, method="exact").value,
        "train_loss": float(obj.loss()),
        "train_error": train_err,
        "test_error": test_err,
    }


def rescale_until_sharper(sharpened, reference, margin: float, seed: int) -> dict:
    """λ1 (Lanczos, rtol 1e-10), exact trace, train loss and errors of two trained digits problems, and
    of ``sharpened`` under the smallest α = 2^k (k ≥ 0, α < 10⁶) whose λ1 and trace both reach
    ``margin`` times the reference's: ``{"alpha", "before", "after", "reference"}``."""
    before = _solution_measures(sharpened.model, sharpened, seed)
    reference_measures = _solution_measures(reference.model, reference, seed)
    alpha, after = 1.0, before
    while (
        after["lambda_max"] < margin * reference_measures["lambda_max"]
        or after["trace"] < margin * reference_measures["trace"]
    ) and alpha < 1e6:
        alpha *= 2
        after = _solution_measures(symmetries.layer_rescale(sharpened.model, 0, alpha), sharpened, seed)
    return {"alpha": alpha, "before": before, "after": after, "reference": reference_measures}


def _scale_inputs(net: torch.nn.Sequential, x: torch.Tensor, c: float, compensate: bool) -> tuple:
    """x → c·x, with θ1 → θ1/c when ``compensate`` (the reparametrization) and without (its control)."""
    return symmetries.reparametrize_inputs(net, x, c) if compensate else (net, x * c)


def input_scaling_changes(net, data, digits, scales: Sequence[float], seed: int, *, compensate: bool) -> dict:
    """x → c·x (with θ1 → θ1/c when ``compensate``): the regression net's first-layer Hessian block
    against c² H11 and its λ1 (Lanczos, rtol 1e-12), and the digits net's test-error change."""

    def test_error(model, x) -> float:
        return float((model(x).argmax(1) != digits.test_labels).double().mean())

    with torch.no_grad():
        base_err = test_error(digits.model, digits.data.x_test)
    obj = Objective(net, (data.x, data.y))
    w1 = obj.param_slice("0.weight")
    h11 = obj.hessian()[w1, w1]
    lam = ev.hessian_top_eigenvalue(obj, rtol=1e-12, seed=seed).value
    rows = []
    for c in scales:
        moved, x_c = _scale_inputs(net, data.x, c, compensate)
        obj_c = Objective(moved, (x_c, data.y))
        err = relative_error(obj_c.hessian()[w1, w1], c**2 * h11)
        lam_c = ev.hessian_top_eigenvalue(obj_c, rtol=1e-12, seed=seed).value
        d_moved, dx = _scale_inputs(digits.model, digits.data.x_test, c, compensate)
        with torch.no_grad():
            err_change = abs(test_error(d_moved, dx) - base_err)
        rows.append({"c": c, "block_error": err, "lambda_max": lam_c, "test_error_change": err_change})
    return {"test_error": base_err, "lambda_max": lam, "rows": rows}
