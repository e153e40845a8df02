"""Curvature benchmark: λ1, trace and HVP cost against baselines, printed as tables.

    python -m benchmarks.curvature            # sizes ≈ 1e3, 1e4, 1e5 parameters, n = 512
    python -m benchmarks.curvature --quick    # tiny sizes (what the test suite runs)

Baselines live here, not in the package: a reimplementation of PyHessian's algorithms (power
iteration on a cached double-backward HVP over parameter lists, stopping on the relative change
of the eigenvalue, tol 1e-3 and 1e-6; Hutchinson with its relative-change stopping rule) and
plain Hutchinson. The nets learn a width-4 teacher and are trained for 300 full-batch L-BFGS
iterations, so curvature is measured near a minimum; the hard-gap case (10 outputs, random
targets, at initialization) has clustered top eigenvalues (its λ2/λ1 is printed).
Ground truth: λ1 from Lanczos at rtol 1e-13 (its residual
bound is printed), the trace from the exact gradient-norm identity (ReLU MLP, MSE).
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass

import numpy as np
import torch
from tabulate import tabulate
from torch import nn

from constructions.training import train_lbfgs
from evaluators import Objective, hessian_spectrum, hessian_top_eigenvalue, hessian_trace, mse
from evaluators.spectrum import power_iteration

N_SAMPLES = 512


@dataclass(frozen=True)
class Case:
    """A ReLU MLP on n Gaussian inputs; targets from a width-4 teacher (trained to near a minimum)
    or, for the hard-gap case, random targets at initialization, where 10 outputs cluster λ1."""

    name: str
    d: int
    hidden: tuple[int, ...]
    outputs: int
    teacher: bool = True
    train_iters: int = 300


FULL_CASES = (
    Case("1e3", 32, (24,), 1),
    Case("1e4", 32, (300,), 1),
    Case("1e5", 64, (256, 256), 1),
    Case("hard-gap 1e4 (10 out)", 32, (240,), 10, teacher=False, train_iters=0),
)
QUICK_CASES = (
    Case("tiny", 6, (8,), 1, train_iters=50),
    Case("tiny hard-gap (3 out)", 6, (8,), 3, teacher=False, train_iters=0),
)


def build(case: Case, n: int, seed: int = 0) -> Objective:
    torch.manual_seed(seed)
    layers, fan_in = [], case.d
    for h in case.hidden:
        layers += [nn.Linear(fan_in, h), nn.ReLU()]
        fan_in = h
    layers.append(nn.Linear(fan_in, case.outputs))
    model = nn.Sequential(*layers).double()
    x = torch.randn(n, case.d, dtype=torch.float64)
    if case.teacher:
        teacher = nn.Sequential(nn.Linear(case.d, 4), nn.ReLU(), nn.Linear(4, case.outputs)).double()
        with torch.no_grad():
            y = teacher(x) + 0.01 * torch.randn(n, case.outputs, dtype=torch.float64)
    else:
        y = torch.randn(n, case.outputs, dtype=torch.float64)
    if case.train_iters:
        train_lbfgs(model, mse, x, y, max_iter=case.train_iters)
    return Objective(model, (x, y))


# --------------------------------------------------------------------------- PyHessian baseline
class PyHessianBaseline:
    """PyHessian 0.1's algorithms, reimplemented: gradients with create_graph once, then
    ``hv = autograd.grad(g, params, v, retain_graph=True)`` over parameter lists."""

    def __init__(self, obj: Objective):
        self.params = [p.detach().clone().requires_grad_(True) for p in obj.unflatten(obj.theta).values()]
        self.names = list(obj.layout.names)
        loss = torch.func.functional_call(obj.module, dict(zip(self.names, self.params, strict=True)), (obj.inputs,))
        loss = ((loss - obj.targets.reshape(loss.shape)) ** 2).sum(dim=1).mean()
        self.grads = torch.autograd.grad(loss, self.params, create_graph=True)
        self.hvps = 0

    def hvp(self, v: list[torch.Tensor]) -> list[torch.Tensor]:
        self.hvps += 1
        return list(torch.autograd.grad(self.grads, self.params, v, retain_graph=True))

    @staticmethod
    def _normalize(v):
        s = torch.sqrt(sum((x * x).sum() for x in v))
        return [x / (s + 1e-6) for x in v]

    def eigenvalue(self, tol: float, max_iter: int = 100, seed: int = 0) -> float:
        gen = torch.Generator().manual_seed(seed)
        v = self._normalize([torch.randn(p.shape, generator=gen, dtype=p.dtype) for p in self.params])
        eig = None
        for _ in range(max_iter):
            hv = self.hvp(v)
            tmp = sum((a * b).sum() for a, b in zip(hv, v, strict=True)).item()
            v = self._normalize(hv)
            if eig is not None and abs(eig - tmp) / (abs(eig) + 1e-6) < tol:
                return tmp
            eig = tmp
        return eig

    def trace(self, tol: float = 1e-3, max_iter: int = 100, seed: int = 0) -> float:
        gen = torch.Generator().manual_seed(seed)
        samples, trace = [], 0.0
        for _ in range(max_iter):
            v = [torch.randint(0, 2, p.shape, generator=gen).to(p.dtype) * 2 - 1 for p in self.params]
            hv = self.hvp(v)
            samples.append(sum((a * b).sum() for a, b in zip(hv, v, strict=True)).item())
            if abs(np.mean(samples) - trace) / (abs(trace) + 1e-6) < tol:
                return float(np.mean(samples))
            trace = float(np.mean(samples))
        return trace


def _median_time(fn, repeats: int = 3) -> float:
    fn()  # warm-up: first calls pay for lazy initialization (e.g. torch.func tracing)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _power_hvps_to(obj: Objective, truth: float, rel: float, cap: int) -> int:
    """HVPs plain power iteration needs before its Rayleigh quotient is within ``rel`` of λ1."""
    gen = torch.Generator().manual_seed(0)
    v = torch.randn(obj.num_params, generator=gen, dtype=obj.dtype)
    v /= v.norm()
    for k in range(1, cap + 1):
        hv = obj.hvp(v)
        if abs(float(v @ hv) - truth) <= rel * abs(truth):
            return k
        v = hv / hv.norm()
    return cap + 1  # not reached: reported as "> cap"


def benchmark_case(case: Case, n: int, repeats: int, power_cap: int) -> tuple[list, list, dict]:
    obj = build(case, n)
    top2 = hessian_spectrum(obj, 2, rtol=1e-13, seed=123)
    truth = float(top2.values[0])
    trace_truth = hessian_trace(obj, method="exact").value
    lam_rows = []

    def lam_row(method, value, hvps, seconds):
        lam_rows.append(
            [
                case.name,
                obj.num_params,
                method,
                hvps,
                f"{seconds:.3f}",
                f"{abs(value - truth) / abs(truth):.1e}",
            ]
        )

    lam_rows.append(
        [
            case.name,
            obj.num_params,
            f"ground truth (λ2/λ1 = {top2.values[1] / truth:.4f})",
            top2.hvps,
            "",
            f"resid {top2.residuals[0]:.1e}",
        ]
    )
    for rtol in (1e-6, 1e-10):
        est = hessian_top_eigenvalue(obj, rtol=rtol)
        secs = _median_time(lambda rtol=rtol: hessian_top_eigenvalue(obj, rtol=rtol), repeats)
        lam_row(f"lanczos rtol={rtol:g} (ours)", est.value, est.hvps, secs)
    for tol in (1e-3, 1e-6):
        base = PyHessianBaseline(obj)
        start = time.perf_counter()
        value = base.eigenvalue(tol)
        lam_row(f"pyhessian power tol={tol:g}", value, base.hvps, time.perf_counter() - start)
    est = power_iteration(obj, rtol=1e-6, maxiter=power_cap)
    lam_row("power rtol=1e-6 (ours, baseline)", est.value, est.hvps, est.seconds)
    power_1e4 = _power_hvps_to(obj, truth, 1e-4, power_cap)
    lanczos = hessian_top_eigenvalue(obj, rtol=1e-10)

    # one HVP: ours (cached graph) vs PyHessian's list-based cached HVP vs torch.func jvp(grad)
    v = torch.randn(obj.num_params, dtype=obj.dtype)
    obj.hvp(v)
    ours = _median_time(lambda: obj.hvp(v), repeats * 5)
    base = PyHessianBaseline(obj)
    vl = [t.clone() for t in obj.unflatten(v).values()]
    cached = _median_time(lambda: base.hvp(vl), repeats * 5)

    def func_hvp():
        def loss(t):
            return obj.loss(t)

        return torch.func.jvp(torch.func.grad(loss), (obj.theta,), (v,))[1]

    jvp_time = _median_time(func_hvp, repeats)
    grad_time = _median_time(lambda: obj.grad(), repeats * 3)
    exact_time = _median_time(lambda: hessian_trace(obj, method="exact"), repeats * 3)
    errs = {}
    for method in ("hutchinson", "hutch++"):
        errs[method] = float(
            np.mean(
                [
                    abs(
                        hessian_trace(
                            obj,
                            method=method,
                            samples=100 if method == "hutchinson" else 99,
                            seed=s,
                        ).value
                        - trace_truth
                    )
                    / abs(trace_truth)
                    for s in range(10)
                ]
            )
        )
    base = PyHessianBaseline(obj)
    pyh_trace = base.trace()
    cost_row = [
        case.name,
        obj.num_params,
        f"{ours * 1e3:.2f}",
        f"{cached * 1e3:.2f}",
        f"{ours / cached:.2f}",
        f"{jvp_time * 1e3:.2f}",
        f"{grad_time * 1e3:.2f}",
        f"{exact_time * 1e3:.2f}",
        f"{exact_time / grad_time:.2f}",
        f"{errs['hutchinson']:.1e}",
        f"{errs['hutch++']:.1e}",
        f"{errs['hutchinson'] / max(errs['hutch++'], 1e-300):.1f}",
        f"{abs(pyh_trace - trace_truth) / abs(trace_truth):.1e} ({base.hvps})",
    ]
    targets = {
        "case": case.name,
        "lanczos_hvps_1e-10": lanczos.hvps,
        "lanczos_rel_err": abs(lanczos.value - truth) / abs(truth),
        "power_hvps_to_1e-4": power_1e4,
        "hvp_ratio": ours / cached,
        "exact_trace_over_grad": exact_time / grad_time,
        "hutchpp_gain": errs["hutchinson"] / max(errs["hutch++"], 1e-300),
    }
    return lam_rows, [cost_row], targets


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, one repeat (smoke test)")
    args = parser.parse_args(argv)
    cases, n, repeats, cap = (QUICK_CASES, 32, 1, 500) if args.quick else (FULL_CASES, N_SAMPLES, 3, 3000)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    lam_rows, cost_rows, targets = [], [], []
    for case in cases:
        a, b, t = benchmark_case(case, n, repeats, cap)
        lam_rows += a
        cost_rows += b
        targets.append(t)
    print(f"λ1 (n = {n}; rel. err vs Lanczos at rtol 1e-13; seconds are medians of {repeats})\n")
    print(
        tabulate(
            lam_rows,
            headers=["case", "P", "method", "HVPs", "seconds", "rel. err"],
            tablefmt="github",
        )
    )
    print("\nCost and trace (ms are medians; trace errors are means over 10 seeds, relative)\n")
    print(
        tabulate(
            cost_rows,
            headers=[
                "case",
                "P",
                "HVP ours ms",
                "HVP cached-dbl-bwd ms",
                "ratio",
                "HVP func.jvp(grad) ms",
                "grad ms",
                "exact trace ms",
                "exact/grad",
                "Hutchinson@100 err",
                "Hutch++@99 err",
                "gain",
                "PyHessian trace err (HVPs)",
            ],
            tablefmt="github",
        )
    )
    print("\nTargets\n")
    rows = []
    for t in targets:
        power = t["power_hvps_to_1e-4"]
        power_txt = f"> {cap}" if power > cap else str(power)
        hard = "hard-gap" in t["case"]
        met = t["lanczos_rel_err"] <= 1e-6 and t["lanczos_hvps_1e-10"] * 5 <= power
        rows.append(
            [
                t["case"],
                f"{t['lanczos_hvps_1e-10']} vs power {power_txt}",
                ("yes" if met else "no") if hard else "(target is on the hard-gap case)",
                f"{t['hvp_ratio']:.2f} ({'yes' if t['hvp_ratio'] <= 1.2 else 'no'})",
                f"{t['exact_trace_over_grad']:.2f} ({'yes' if t['exact_trace_over_grad'] <= 3 else 'no'})",
                f"{t['hutchpp_gain']:.1f} ({'yes' if t['hutchpp_gain'] >= 3 else 'no'})",
            ]
        )
    print(
        tabulate(
            rows,
            headers=[
                "case",
                "Lanczos HVPs (1e-10) vs power to 1e-4",
                "≤ 1/5 and rel.err ≤ 1e-6",
                "HVP ≤ 1.2× cached",
                "exact trace ≤ 3× grad",
                "Hutch++ ≥ 3× better",
            ],
            tablefmt="github",
        )
    )


if __name__ == "__main__":
    main()
