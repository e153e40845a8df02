"""GD+WD speed on BN linear regression: batched closed-form steps vs a naive autograd loop.

    python -m benchmarks.gd            # d = 100, n = 20, 8 runs, 20 000 steps
    python -m benchmarks.gd --quick    # tiny (what the test suite runs)

Prints steps per second (run-steps: one step of one run) for the catalogue's trainer
(``constructions.bn_regression.gradient_descent``, all runs in one tensor program, closed-form
gradient, logging only every k steps) and for a naive loop (one run at a time, an
``nn.Module`` forward and ``loss.backward()`` each step), and checks both reach the same weights.
"""

from __future__ import annotations

import argparse
import time

import torch
from tabulate import tabulate

from constructions.bn_regression import build_bn_regression, gradient_descent
from constructions.specs import BNLinearRegressionSpec


def naive_loop(problem, w0: torch.Tensor, lr: float, wd: float, steps: int) -> torch.Tensor:
    finals = []
    for w_init in w0:
        model = problem.model(w_init)
        for _ in range(steps):
            model.zero_grad()
            loss = ((model(problem.data.x) - problem.data.y) ** 2).mean()
            loss.backward()
            with torch.no_grad():
                model.w.mul_(1 - lr * wd).sub_(lr * model.w.grad)
        finals.append(model.w.detach().clone())
    return torch.stack(finals)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    n, d, runs, steps, naive_steps = (10, 20, 2, 500, 200) if args.quick else (20, 100, 8, 20_000, 2_000)
    problem = build_bn_regression(BNLinearRegressionSpec(n=n, d=d), torch.Generator().manual_seed(0))
    w0 = torch.randn(runs, d, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    lr, wd = 0.1, 0.01
    gradient_descent(problem, w0, lr=lr, weight_decay=wd, steps=2, log_every=1)  # warm-up (torch.func tracing)
    rows = []
    for log_every in (steps, 100):
        start = time.perf_counter()
        traj = gradient_descent(problem, w0, lr=lr, weight_decay=wd, steps=steps, log_every=log_every)
        secs = time.perf_counter() - start
        rows.append(
            [
                f"batched closed form, log every {log_every}",
                runs,
                steps,
                f"{secs:.2f}",
                f"{runs * steps / secs:,.0f}",
            ]
        )
    start = time.perf_counter()
    w_naive = naive_loop(problem, w0, lr, wd, naive_steps)
    secs = time.perf_counter() - start
    rows.append(
        [
            "naive autograd loop (one run at a time)",
            runs,
            naive_steps,
            f"{secs:.2f}",
            f"{runs * naive_steps / secs:,.0f}",
        ]
    )
    short = gradient_descent(problem, w0, lr=lr, weight_decay=wd, steps=naive_steps, log_every=naive_steps).w
    agree = float((short - w_naive).norm() / w_naive.norm())
    batched = runs * steps / float(rows[0][3])
    naive = runs * naive_steps / secs
    print(tabulate(rows, headers=["trainer", "runs", "steps", "seconds", "run-steps/s"], tablefmt="github"))
    print(
        f"\nspeed-up (no logging): {batched / naive:.1f}×; "
        f"same weights after {naive_steps} steps: rel. diff {agree:.1e}"
    )
    print(f"final cos to min-norm (batched, {steps} steps): {traj.cos[-1].min():.5f}")


if __name__ == "__main__":
    main()
