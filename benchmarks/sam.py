"""1-SAM speed on the Wen et al. XOR nets: batched rank-one steps vs a naive autograd loop.

    python -m benchmarks.sam            # d = 30, n = 100, width 500 (the paper's size)
    python -m benchmarks.sam --quick    # tiny (what the test suite runs)

Prints SAM steps per second (one step of one run) for ``constructions.xor_training.sam_epoch`` with
R runs batched into one tensor program, and for ``sam_step_autograd`` (one ``TwoLayerNet`` at a
time, two autograd gradients per step), and checks both reach the same weights.
Target (issue #6): ≥ 20 000 steps/s aggregate at d = 30, width 500 on 2 cores and ≥ 10× the naive loop.
"""

from __future__ import annotations

import argparse
import time

import torch
from tabulate import tabulate

from constructions.specs import XorSpec
from constructions.xor import build_xor
from constructions.xor_training import init_xor_nets, sam_epoch, sam_step_autograd


def _batched(arch, runs, width, data, epochs, generator) -> float:
    nets = init_xor_nets(arch, runs, width, data.d, torch.Generator().manual_seed(1))
    start = time.perf_counter()
    for _ in range(epochs):
        sam_epoch(nets, data.x, data.y, 0.01, 0.05, generator)
    return runs * epochs * len(data.x) / (time.perf_counter() - start)


def _naive(arch, width, data, steps) -> float:
    net = init_xor_nets(arch, 1, width, data.d, torch.Generator().manual_seed(1)).module(0)
    start = time.perf_counter()
    for t in range(steps):
        sam_step_autograd(net, data.x, data.y, t % len(data.x), 0.01, 0.05)
    return steps / (time.perf_counter() - start)


def _agreement(arch, width, data) -> float:
    """Relative weight difference after one epoch: batched (R = 1) vs the naive loop in the same order."""
    gen = torch.Generator().manual_seed(7)
    nets = init_xor_nets(arch, 1, width, data.d, torch.Generator().manual_seed(1))
    net = nets.module(0)
    sam_epoch(nets, data.x, data.y, 0.01, 0.05, gen)
    order = torch.argsort(torch.rand(1, len(data.x), generator=torch.Generator().manual_seed(7)), dim=1)[0]
    for i in order.tolist():
        sam_step_autograd(net, data.x, data.y, i, 0.01, 0.05)
    return float((nets.w1[0] - net.w1.detach()).norm() / net.w1.detach().norm())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    d, n, width, epochs, naive_steps, run_grid = (
        (6, 20, 16, 2, 40, (1, 4)) if args.quick else (30, 100, 500, 20, 2000, (1, 8, 16, 32, 64))
    )
    data = build_xor(XorSpec(d=d, n=n), torch.Generator().manual_seed(0))
    gen = torch.Generator().manual_seed(3)
    rows, best = [], {}
    for arch in ("nobias", "bias", "simln"):
        naive = _naive(arch, width, data, naive_steps)
        rows.append([arch, "naive autograd loop (one run at a time)", 1, f"{naive:,.0f}", "1.0×"])
        for runs in run_grid:
            rate = _batched(arch, runs, width, data, epochs, gen)
            rows.append([arch, "batched rank-one 1-SAM", runs, f"{rate:,.0f}", f"{rate / naive:.1f}×"])
            best[arch] = max(best.get(arch, (0, 0)), (rate, rate / naive))
        rows.append([arch, "agreement after one epoch (rel. ‖ΔW1‖)", 1, f"{_agreement(arch, width, data):.1e}", ""])
    sbn_epochs = 1 if args.quick else 2
    sbn_runs = 2 if args.quick else 8
    rate = _batched("simbn", sbn_runs, width, data, sbn_epochs, gen)
    rows.append(["simbn", "batched autograd (full-forward step)", sbn_runs, f"{rate:,.0f}", ""])
    print(f"d = {d}, n = {n}, width {width}, threads {torch.get_num_threads()}")
    print(tabulate(rows, headers=["net", "trainer", "runs", "SAM steps/s", "vs naive"], tablefmt="github"))
    print("\nTargets: ≥ 20,000 steps/s and ≥ 10× naive. Best per net:")
    for arch, (rate, speedup) in best.items():
        print(f"  {arch}: {rate:,.0f} steps/s, {speedup:.1f}×")


if __name__ == "__main__":
    main()
