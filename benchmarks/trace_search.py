"""The flattest-interpolator search's cost per step: the closed-form Gauss–Newton Gram vs per-sample Jacobians.

    python -m benchmarks.trace_search            # the full size of the wen2023.*-bound-survives-search claims
    python -m benchmarks.trace_search --quick    # tiny (what the test suite runs)

One step of the search is the KKT solve for the flattest interpolating output layer and a backward
pass through it (:func:`constructions.trace_search.flattest_output_layer`). ``M = Σ_i J_iᵀJ_i`` comes
either from the closed form (``feature_gram``, what the search uses) or from torch.func per-sample
Jacobians (the reference it is tested against); the table gives seconds per step for the bias net
and the Sim-LN net, and the largest relative difference between the two traces.
"""

from __future__ import annotations

import argparse
import time

import torch
from tabulate import tabulate

from constructions import trace_search
from constructions.population_rows import one_thread
from constructions.specs import XorSpec
from constructions.xor import build_xor


def _jacobian_gram(w, b, x, simln_eps):
    phi, jac = trace_search._feature_jacobians(w, b, x, simln_eps)
    return phi, torch.einsum("ipk,ipl->kl", jac, jac)


def _seconds_per_step(gram, w0, b0, x, y, simln_eps, steps: int) -> tuple[float, float]:
    original = trace_search.feature_gram
    trace_search.feature_gram = gram  # the search's one seam: where M comes from
    try:
        w, b = w0.clone().requires_grad_(True), b0.clone().requires_grad_(True)
        start = time.perf_counter()
        for _ in range(steps):
            _, trace = trace_search.flattest_output_layer(w, b, x, y, simln_eps)
            trace.backward()
        return (time.perf_counter() - start) / steps, float(trace.detach())
    finally:
        trace_search.feature_gram = original


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    d, n, width, steps = (4, 10, 14, 3) if args.quick else (10, 40, 48, 20)
    data = build_xor(XorSpec(d=d, n=n), torch.Generator().manual_seed(0))
    g = torch.Generator().manual_seed(1)
    w0 = torch.randn(width, d, generator=g, dtype=torch.float64) / d**0.5
    b0 = torch.randn(width, generator=g, dtype=torch.float64)
    rows = []
    for net, eps in (("bias", None), ("Sim-LN (ϵ = 1)", 1.0)):
        with one_thread():  # as the claims run
            closed, t_closed = _seconds_per_step(trace_search.feature_gram, w0, b0, data.x, data.y, eps, steps)
            jacobian, t_jac = _seconds_per_step(_jacobian_gram, w0, b0, data.x, data.y, eps, steps)
        rel = abs(t_closed - t_jac) / abs(t_jac)
        rows.append([net, f"{closed * 1e3:.2f}", f"{jacobian * 1e3:.2f}", f"{jacobian / closed:.1f}×", f"{rel:.1e}"])
    headers = ["net", "closed form (ms/step)", "per-sample Jacobians (ms/step)", "speed-up", "trace rel. diff"]
    print(f"d = {d}, n = {n}, width {width}, {steps} steps, one thread")
    print(tabulate(rows, headers=headers, tablefmt="github"))


if __name__ == "__main__":
    main()
