"""The evaluators at a user's scale, beside PyHessian and curvlinops, printed as tables.

    pip install torch==2.13.0 -e ".[scale]"    # PyHessian and curvlinops, for this benchmark only
    python -m benchmarks.scale                  # ≈1e6-parameter CNN and MLP, n = 4096, batches of 256
    python -m benchmarks.scale --quick          # tiny sizes (what the test suite runs)

Setup: synthetic 3×32×32 Gaussian images labelled by a fixed random teacher CNN (10 classes), the
MSE loss on one-hot labels (the seeds' convention, ``(1/n) Σ ‖f(x_i) − y_i‖²``), float64, every
method on the same ``DataLoader`` (batches of 256, unshuffled), at initialization. Threads: what
torch sets (2 on the reference host).

1. **λ1.** Ours: Lanczos on the streamed objective, its residual bound r certifying that an
   eigenvalue lies within r of the value. PyHessian: ``hessian.eigenvalues`` (power iteration,
   tol 1e-6). curvlinops: ``HessianLinearOperator`` + ``scipy.sparse.linalg.eigsh`` (tol 1e-6).
   Relative errors are against our value, whose own error is its bound.
2. **Trace at a fixed budget of products.** Ours: Hutch++; PyHessian: ``hessian.trace``
   (Hutchinson with tol 0, so it spends the budget). Reference: the exact gradient-norm identity
   for the MLP (a ReLU MLP under MSE), and a long Hutch++ run (with its standard error) for the CNN.
3. **Hessian-vector products** at n = 1024, 4096, 16384, each path in a fresh process: the
   streamed path (batches of 256), the single-tensor path (one graph over all n, kept between
   products), and curvlinops on the same batches; the seconds of the first and the next product,
   and the peak resident memory (``ru_maxrss``) that building the operator and one product added,
   measured in a second process whose large allocations are mmapped and returned when freed (so the
   peak is not hidden by memory freed earlier; that setting slows allocation, hence two processes).

Targets (#20): λ1 in at most PyHessian's seconds at equal or better accuracy; a streamed product
within 1.2× curvlinops' time; the streamed product's memory flat in n within 10%.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass

import numpy as np
import torch
from tabulate import tabulate
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from evaluators import Objective, hessian_top_eigenvalue, hessian_trace

BATCH = 256


@dataclass(frozen=True)
class Size:
    n: int
    image: int  # side of the square image
    width: int  # the MLP's hidden width
    channels: tuple[int, int]  # the CNN's two conv layers
    hidden: int  # the CNN's dense layer
    memory_ns: tuple[int, ...]
    budget: int  # trace products
    reference_budget: int  # the CNN's long Hutch++ run


FULL = Size(4096, 32, 330, (16, 32), 512, (1024, 4096, 16384), 60, 600)
QUICK = Size(96, 8, 12, (4, 8), 16, (64,), 12, 60)


def cnn(size: Size) -> nn.Sequential:
    c1, c2 = size.channels
    flat = c2 * (size.image // 4) ** 2
    return nn.Sequential(
        nn.Conv2d(3, c1, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(c1, c2, 3, stride=2, padding=1), nn.ReLU(),
        nn.Flatten(), nn.Linear(flat, size.hidden), nn.ReLU(), nn.Linear(size.hidden, 10),
    )  # fmt: skip


def mlp(size: Size) -> nn.Sequential:
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * size.image**2, size.width), nn.ReLU(), nn.Linear(size.width, 10))


def data(size: Size, n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Gaussian images and the one-hot labels of a fixed random teacher CNN."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 3, size.image, size.image, generator=gen, dtype=torch.float64)
    torch.manual_seed(seed + 1)
    teacher = cnn(size).double()
    with torch.no_grad():  # batch by batch: the teacher's activations must not set the process's peak memory
        labels = torch.cat([teacher(batch).argmax(dim=1) for batch in x.split(BATCH)])
    return x, nn.functional.one_hot(labels, 10).double()


def model(kind: str, size: Size, seed: int = 2) -> nn.Module:
    torch.manual_seed(seed)
    return (cnn(size) if kind == "cnn" else mlp(size)).double()


class BatchMSE(nn.MSELoss):
    """The objective's MSE on a batch, ``(1/b) Σ_i ‖f(x_i) − y_i‖²``, as the baselines' criterion
    (curvlinops reads its ``reduction="mean"`` to weight batches by size)."""

    def __init__(self):
        super().__init__(reduction="mean")

    def forward(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return super().forward(output, target) * output.shape[1]


mse_mean = BatchMSE()


def _timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


# ------------------------------------------------------------------------------------------ λ1
def lambda_rows(kind: str, size: Size) -> list[list]:
    net, (x, y) = model(kind, size), data(size, size.n)
    loader = DataLoader(TensorDataset(x, y), batch_size=BATCH)
    ours, seconds = _timed(lambda: hessian_top_eigenvalue(Objective(net, loader), rtol=1e-8))
    rows = [[kind, "ours: Lanczos (streamed)", ours.hvps, seconds, ours.value, 0.0, ours.error / abs(ours.value)]]
    for name, run in _lambda_baselines(net, loader).items():
        (value, hvps), secs = _timed(run)
        rows.append([kind, name, hvps, secs, value, abs(value - ours.value) / abs(ours.value), None])
    return rows


def _lambda_baselines(net: nn.Module, loader: DataLoader) -> dict:
    found = {}
    try:
        from pyhessian import hessian as pyhessian
    except ImportError:
        pyhessian = None
    if pyhessian is not None:

        def power():
            with _pyhessian_run(pyhessian) as calls:
                values, _ = pyhessian(net, mse_mean, dataloader=loader, cuda=False).eigenvalues(maxIter=200, tol=1e-6)
            return float(values[0]), calls[0]

        found["PyHessian: power iteration"] = power
    try:
        from curvlinops import HessianLinearOperator
        from scipy.sparse.linalg import eigsh
    except ImportError:
        return found

    def lanczos():
        op = HessianLinearOperator(net, mse_mean, list(net.parameters()), list(loader)).to_scipy()
        counted, calls = _counted(op)
        value = eigsh(counted, k=1, which="LA", tol=1e-6)[0][0]
        return float(value), calls[0]

    found["curvlinops + scipy eigsh"] = lanczos
    return found


def _counted(op) -> tuple:
    """``op`` as a scipy operator that counts its products, and the count (a one-item list)."""
    from scipy.sparse.linalg import LinearOperator

    calls = [0]

    def matvec(v):
        calls[0] += 1
        return op @ v

    return LinearOperator(op.shape, matvec=matvec, dtype=np.float64), calls


@contextlib.contextmanager
def _pyhessian_run(pyhessian):
    """Counts PyHessian's products while it runs, in float64: it draws its probes with the default
    dtype, which must match the float64 model. Yields the count (a one-item list); restores both."""
    calls, original, dtype = [0], pyhessian.dataloader_hv_product, torch.get_default_dtype()

    def counting(self, *args, **kwargs):
        calls[0] += 1
        return original(self, *args, **kwargs)

    pyhessian.dataloader_hv_product = counting
    torch.set_default_dtype(torch.float64)
    try:
        yield calls
    finally:
        pyhessian.dataloader_hv_product = original
        torch.set_default_dtype(dtype)


# ------------------------------------------------------------------------------------------ trace
def trace_rows(kind: str, size: Size) -> list[list]:
    net, (x, y) = model(kind, size), data(size, size.n)
    loader = DataLoader(TensorDataset(x, y), batch_size=BATCH)
    obj = Objective(net, loader)
    if kind == "mlp":
        reference, ref_se = hessian_trace(obj, method="exact").value, 0.0  # the gradient-norm identity
    else:
        long = hessian_trace(obj, method="hutch++", samples=size.reference_budget, seed=99)
        reference, ref_se = long.value, long.error
    ours, seconds = _timed(lambda: hessian_trace(obj, method="hutch++", samples=size.budget, seed=0))
    rows = [
        [
            kind,
            "ours: Hutch++",
            ours.hvps,
            seconds,
            ours.value,
            abs(ours.value - reference) / abs(reference),
            ours.error,
        ]
    ]
    try:
        from pyhessian import hessian as pyhessian
    except ImportError:
        return [*rows, [kind, "reference", None, None, reference, None, ref_se]]

    def hutchinson():
        with _pyhessian_run(pyhessian) as calls:
            samples = pyhessian(net, mse_mean, dataloader=loader, cuda=False).trace(maxIter=size.budget, tol=0.0)
        return float(np.mean(samples)), float(np.std(samples, ddof=1) / np.sqrt(len(samples))), calls[0]

    (value, se, hvps), secs = _timed(hutchinson)
    rows.append([kind, "PyHessian: Hutchinson", hvps, secs, value, abs(value - reference) / abs(reference), se])
    return [*rows, [kind, "reference", None, None, reference, None, ref_se]]


# ------------------------------------------------------------------------------------------ one HVP
def one_product(kind: str, size: Size, n: int, path: str) -> dict:
    """Peak memory that building the operator and its first product add, then the seconds of the
    first and of the next product, in this process (run it in a fresh one)."""
    net, (x, y) = model(kind, size), data(size, n)
    v = torch.randn(sum(p.numel() for p in net.parameters()), dtype=torch.float64)
    batches = list(DataLoader(TensorDataset(x, y), batch_size=BATCH))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if path == "curvlinops":
        from curvlinops import HessianLinearOperator

        op = HessianLinearOperator(net, mse_mean, list(net.parameters()), batches)
        product = lambda: op @ v  # noqa: E731
    else:
        obj = Objective(net, batches if path == "streamed" else (x, y))
        product = lambda: obj.hvp(v)  # noqa: E731
    _, first = _timed(product)
    added = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    _, after = _timed(product)
    return {"first": first, "next": after, "added_mib": added / 1024}


# For the memory column only, glibc serves allocations above 128 KiB by mmap and unmaps them when
# freed, so the resident peak grows with what a product allocates instead of reusing memory freed
# earlier (with the default, adaptive threshold the "added" peak depends on the allocator's history).
# It slows every path's allocations, so the seconds come from a run with the default allocator.
FIXED_MMAP = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(128 * 1024)}


def _one_product_process(args: list[str], env: dict | None) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.scale", "--one-product", *args],
        capture_output=True, text=True, check=True, env=env,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def product_rows(size: Size, quick: bool) -> list[list]:
    rows = []
    for kind in ("cnn", "mlp"):
        for n in size.memory_ns:
            for path in ("streamed", "single tensor", "curvlinops"):
                if path == "curvlinops" and not _installed("curvlinops"):
                    continue
                args = [kind, "quick" if quick else "full", str(n), path]
                timed, memory = _one_product_process(args, None), _one_product_process(args, FIXED_MMAP)
                rows.append([kind, n, path, timed["first"], timed["next"], memory["added_mib"]])
    return rows


def _installed(name: str) -> bool:
    try:
        __import__(name)
    except ImportError:
        return False
    return True


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes")
    parser.add_argument("--one-product", nargs=4, metavar=("KIND", "SIZE", "N", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one_product:
        kind, which, n, path = args.one_product
        print(json.dumps(one_product(kind, QUICK if which == "quick" else FULL, int(n), path)))
        return
    size = QUICK if args.quick else FULL
    params = {kind: sum(p.numel() for p in model(kind, size).parameters()) for kind in ("cnn", "mlp")}
    print(f"n = {size.n}, batches of {BATCH}, float64, {torch.get_num_threads()} threads; parameters: {params}")
    missing = [name for name in ("pyhessian", "curvlinops") if not _installed(name)]
    if missing:
        print(f"not installed, left out: {missing} (pip install -e '.[scale]')")
    print("\nλ1 (relative error against ours; ours: its residual bound / λ1)")
    rows = [row for kind in ("cnn", "mlp") for row in lambda_rows(kind, size)]
    print(tabulate(rows, ["model", "method", "HVPs", "seconds", "λ1", "rel. err", "bound / λ1"], floatfmt=".3g"))
    print(f"\nTrace at {size.budget} products (relative error against the reference)")
    rows = [row for kind in ("cnn", "mlp") for row in trace_rows(kind, size)]
    print(tabulate(rows, ["model", "method", "HVPs", "seconds", "trace", "rel. err", "stderr"], floatfmt=".4g"))
    print("\nHessian-vector products, each path in a fresh process (added: the peak resident memory that")
    print("building the operator and its first product added, measured in a second process with glibc's")
    print("mmap threshold fixed at 128 KiB; the single tensor path keeps its graph)")
    rows = product_rows(size, args.quick)
    print(tabulate(rows, ["model", "n", "path", "first s", "next s", "added MiB"], floatfmt=".3g"))


if __name__ == "__main__":
    main()
