"""Relative flatness of a layer: one product per neuron (the layer-input identity) vs (in_features)²
quadratic forms, on the measure benchmark's digits MLPs.

    python -m benchmarks.relative_flatness

For a bias-free-of-BatchNorm net the first layer's Hessian is ``Σ_i c_i (φ_i φ_iᵀ) ⊗ ∂²ℓ_i/∂z²``,
so ``κ_Tr = Tr(A W Wᵀ)`` needs the rows×rows Hessian A of L in a per-sample shift of the layer's
pre-activations (``evaluators.relative_flatness``); the general path takes (in_features)² Hessian-vector
products. One thread, as the benchmark measures.
"""

from __future__ import annotations

import time

import torch
from tabulate import tabulate
from threadpoolctl import threadpool_limits

from constructions.populations import DigitsModel, train_model
from evaluators import Objective, relative_flatness
from evaluators.relative_flatness import _relative_flatness_by_columns


def main() -> None:
    torch.set_num_threads(1)
    rows = []
    with threadpool_limits(limits=1):
        for width, depth in ((32, 1), (64, 1), (64, 2)):
            spec = DigitsModel(width=width, depth=depth, n_train=300, max_epochs=2000, target_loss=0.1)
            trained = train_model(spec, torch.Generator().manual_seed(0), torch.Generator().manual_seed(1))
            obj = Objective(trained.model, (trained.x, trained.y))
            start = time.perf_counter()
            fast = relative_flatness(obj, "0.weight")
            fast_s = time.perf_counter() - start
            shape = obj.layout.shapes[obj.layout.names.index("0.weight")]
            start = time.perf_counter()
            sl = obj.param_slice("0.weight")
            slow = _relative_flatness_by_columns(obj, obj.theta, sl, obj.theta[sl].view(shape))
            slow_s = time.perf_counter() - start
            rows.append(
                [
                    f"{width} × {depth}",
                    f"{fast.hvps} / {shape[1] ** 2}",
                    f"{fast_s:.3f}",
                    f"{slow_s:.3f}",
                    f"{slow_s / fast_s:.0f}×",
                    f"{abs(fast.value - slow) / abs(slow):.1e}",
                ]
            )
    print("digits MLP (n = 300, 64 inputs), first layer, one thread\n")
    headers = [
        "width × depth",
        "products (per neuron / columns²)",
        "per neuron s",
        "columns s",
        "speed-up",
        "rel. diff",
    ]
    print(tabulate(rows, headers=headers, tablefmt="github"))


if __name__ == "__main__":
    main()
