"""1-SAM speed on the Wen et al. XOR nets: the fast steps against their roofline and the autograd loop.

    python -m benchmarks.sam            # d = 30, n = 100, width 500 (the paper's size), 2 threads
    python -m benchmarks.sam --quick    # tiny (what the test suite runs)

For every net, in float64 and float32, prints the aggregate SAM steps per second (one step of one
run) of ``constructions.xor_training.sam_epoch`` with R runs batched, the *roofline* of its
unavoidable work measured for the same shapes and precision, and their ratio:

- Sim-BN: the four products of m·n·d multiply-adds a step cannot avoid (``H = W1 Xᵀ`` and ``A X``
  at w and at the SAM point), timed as batched matrix products alone;
- rank-one nets (no-bias, bias, Sim-LN): one read of W1 for the pre-activations and one rank-one
  update of it, timed as torch's ``bmm`` and ``baddbmm_`` alone (the fused step does both in one
  pass, so it can beat this "roofline").

Also the naive per-run autograd loop, the batched autograd Sim-BN step it replaced, and the
agreement of the fast step with autograd after one epoch (relative max weight difference).
Targets (issue #25): Sim-BN ≥ 60% of its roofline in both precisions and ≥ 4× the autograd step,
agreement ≤ 1e-12 in float64; rank-one nets ≥ 150,000 aggregate steps/s in float64.
"""

from __future__ import annotations

import argparse
import time

import torch
from tabulate import tabulate

from constructions.specs import XorSpec
from constructions.xor import build_xor
from constructions.xor_training import (
    XorNets,
    init_xor_nets,
    sam_epoch,
    sam_step_autograd,
    simbn_step_autograd,
)

RANK_ONE = ("nobias", "bias", "simln")


# Sim-BN at the paper's first-phase η, ρ with γ = 1/4 (with γ = 1 at m = 500 it diverges, see init_xor_nets)
SCHEDULE = {"simbn": (0.005, 0.1)}
DEFAULT = (0.01, 0.05)


def _nets(arch, runs, width, d, dtype) -> XorNets:
    nets = init_xor_nets(arch, runs, width, d, torch.Generator().manual_seed(1), simln_eps=0.01, simbn_gamma=0.25)
    return XorNets(arch, *[None if t is None else t.to(dtype) for t in (nets.w1, nets.b1, nets.w2, nets.gamma)], 0.01)


def _best_of(fn, repeats: int) -> float:
    """The fastest of ``repeats`` timings of ``fn()`` (seconds): the least disturbed one."""
    fn()  # warm-up: compilation, allocator
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def fast_rate(arch, runs, width, data, epochs, dtype, repeats) -> float:
    """Aggregate SAM steps/s of ``sam_epoch`` over ``epochs`` epochs."""
    nets = _nets(arch, runs, width, data.d, dtype)
    gen = torch.Generator().manual_seed(3)

    lr, rho = SCHEDULE.get(arch, DEFAULT)

    def go():
        for _ in range(epochs):
            sam_epoch(nets, data.x, data.y, lr, rho, gen)

    return runs * epochs * len(data.x) / _best_of(go, repeats)


def roofline_rate(arch, runs, width, data, dtype, repeats) -> float:
    """Steps/s if a step cost only its unavoidable tensor products (see the module docstring)."""
    n, d = data.x.shape
    d_in = d + (arch != "nobias")
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(runs, width, d_in, generator=gen, dtype=dtype)
    x = torch.randn(n, d_in, generator=gen, dtype=dtype)
    if arch == "simbn":
        a = torch.randn(runs, width, n, generator=gen, dtype=dtype)

        def products():
            for _ in range(2):
                torch.matmul(w, x.T)
                torch.matmul(a, x)

        per_step = _best_of(lambda: [products() for _ in range(20)], repeats) / 20
    else:
        xi = torch.randn(runs, d_in, 1, generator=gen, dtype=dtype)
        dh = torch.randn(runs, width, 1, generator=gen, dtype=dtype)

        def passes():
            torch.bmm(w, xi)
            w.baddbmm_(dh, xi.transpose(1, 2), alpha=-1e-12)

        per_step = _best_of(lambda: [passes() for _ in range(200)], repeats) / 200
    return runs / per_step


def naive_rate(arch, width, data, steps) -> float:
    net = _nets(arch, 1, width, data.d, torch.float64).module(0)
    start = time.perf_counter()
    for t in range(steps):
        sam_step_autograd(net, data.x, data.y, t % len(data.x), *SCHEDULE.get(arch, DEFAULT))
    return steps / (time.perf_counter() - start)


def autograd_simbn_rate(runs, width, data, steps) -> float:
    nets = _nets("simbn", runs, width, data.d, torch.float64)
    index = torch.zeros(runs, dtype=torch.long)
    start = time.perf_counter()
    for t in range(steps):
        simbn_step_autograd(nets, data.x, data.y, index + t % len(data.x), *SCHEDULE["simbn"])
    return runs * steps / (time.perf_counter() - start)


def agreement(arch, width, data, dtype) -> float:
    """Relative max weight difference after one epoch: the fast step vs autograd in the same order."""
    runs = 2
    lr, rho = SCHEDULE.get(arch, DEFAULT)
    nets = _nets(arch, runs, width, data.d, dtype)
    ref = _nets(arch, runs, width, data.d, torch.float64)
    sam_epoch(nets, data.x, data.y, lr, rho, torch.Generator().manual_seed(7))
    order = torch.argsort(torch.rand(runs, len(data.x), generator=torch.Generator().manual_seed(7)), dim=1)
    if arch == "simbn":
        for t in range(len(data.x)):
            simbn_step_autograd(ref, data.x, data.y, order[:, t], lr, rho)
    else:
        modules = [ref.module(r) for r in range(runs)]
        for t in range(len(data.x)):
            for r, m in enumerate(modules):
                sam_step_autograd(m, data.x, data.y, int(order[r, t]), lr, rho)
        for name, tensor in zip(("w1", "b1", "w2"), (ref.w1, ref.b1, ref.w2), strict=True):
            if tensor is not None:
                tensor.copy_(torch.stack([getattr(m, name).detach() for m in modules]))
    return max(
        float((a.double() - b).abs().max() / b.abs().max()) for a, b in zip(nets.tensors(), ref.tensors(), strict=True)
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        d, n, width, epochs, naive_steps, repeats = 6, 20, 16, 2, 20, 1
        grids = {"rank_one": (2,), "simbn": (2,)}
    else:
        d, n, width, epochs, naive_steps, repeats = 30, 100, 500, 20, 1000, 3
        grids = {"rank_one": (4, 16, 64), "simbn": (2, 4, 8)}
    data = build_xor(XorSpec(d=d, n=n), torch.Generator().manual_seed(0))
    rows, best = [], {}
    for arch in (*RANK_ONE, "simbn"):
        naive = naive_rate(arch, width, data, naive_steps)
        rows.append([arch, "float64", "naive autograd loop (one run at a time)", 1, f"{naive:,.0f}", "", "", "1.0×"])
        if arch == "simbn":
            old = autograd_simbn_rate(grids["simbn"][-1], width, data, naive_steps // 20 or 2)
            rows.append(
                [arch, "float64", "batched autograd step (before)", grids["simbn"][-1], f"{old:,.0f}", "", "", ""]
            )
        grid = grids["simbn" if arch == "simbn" else "rank_one"]
        for dtype in (torch.float64, torch.float32):
            precision = str(dtype).removeprefix("torch.")
            for runs in grid:
                rate = fast_rate(arch, runs, width, data, 1 if arch == "simbn" else epochs, dtype, repeats)
                roof = roofline_rate(arch, runs, width, data, dtype, repeats)
                rows.append(
                    [
                        arch,
                        precision,
                        "fast step",
                        runs,
                        f"{rate:,.0f}",
                        f"{roof:,.0f}",
                        f"{rate / roof:.0%}",
                        f"{rate / naive:.1f}×",
                    ]
                )
                key = (arch, precision)
                best[key] = max(
                    best.get(key, (0.0, 0.0, 0.0)), (rate, rate / roof, rate / (old if arch == "simbn" else naive))
                )
            rows.append(
                [
                    arch,
                    precision,
                    "agreement after one epoch (rel. max |Δw|)",
                    2,
                    f"{agreement(arch, width, data, dtype):.1e}",
                    "",
                    "",
                    "",
                ]
            )
    print(f"d = {d}, n = {n}, width {width}, torch threads {torch.get_num_threads()}")
    print(
        tabulate(
            rows,
            headers=["net", "precision", "step", "runs", "SAM steps/s", "roofline", "of roofline", "vs naive"],
            tablefmt="github",
        )
    )
    print(
        "\nTargets: Sim-BN ≥ 60% of its roofline (both precisions) and ≥ 4× the autograd step, agreement ≤ 1e-12 "
        "(float64); rank-one nets ≥ 150,000 steps/s (float64)."
    )
    print("Best per net and precision (steps/s, share of roofline, speed-up over the step it replaces):")
    for (arch, precision), (rate, share, speedup) in best.items():
        print(f"  {arch:6} {precision}: {rate:,.0f} steps/s, {share:.0%} of roofline, {speedup:.1f}×")


if __name__ == "__main__":
    main()
