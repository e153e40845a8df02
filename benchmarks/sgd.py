"""Minibatch SGD speed on the digits MLPs: ``train_sgd``'s written-out ReLU-MLP step vs autograd.

    python -m benchmarks.sgd            # the families' net (64-32-10) on 256 digits, 300 epochs
    python -m benchmarks.sgd --quick    # tiny (what the test suite runs)

``constructions.training.train_sgd`` trains a ``Linear → ReLU → … → Linear`` net by its own
forward and backward pass (autograd's operations without the engine) and any other model by the
module and autograd. The same net wrapped in a second ``nn.Sequential`` is not recognized, so it
takes the autograd path: both are timed on one torch thread (as the runner runs every claim), per
SGD step including the per-epoch evaluation, for the batch sizes and SAM settings the kaur2023,
keskar2017 and andriushchenko2023 families train with, and their final weights are compared bit for
bit (the committed records were made by the autograd loop).
"""

from __future__ import annotations

import argparse
import time

import torch
from tabulate import tabulate
from torch import nn

from constructions.digits import build_digits
from constructions.nets import mlp
from constructions.specs import DigitsSpec
from constructions.training import train_sgd
from evaluators import zero_one_error


def _train(model, data, batch: int, sam_rho: float, epochs: int):
    """Seconds, epochs run and final weights of one ``train_sgd`` run of at most ``epochs`` epochs."""
    start = time.perf_counter()
    run = train_sgd(
        model,
        data.x,
        data.y,
        lr=0.1,
        batch_size=batch,
        sam_rho=sam_rho,
        max_epochs=epochs,
        target_loss=1e-12,  # never reached: every run trains its full budget
        error_fn=zero_one_error,
        generator=torch.Generator().manual_seed(1),
    )
    return time.perf_counter() - start, run.epochs, [p.detach().clone() for p in model.parameters()]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    n, epochs = (64, 3) if args.quick else (256, 300)
    data = build_digits(DigitsSpec(n_train=n, n_test=100, hidden=(32,)), torch.Generator().manual_seed(0)).data
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    rows = []
    try:
        for batch in sorted({16, 64, n}):
            for sam_rho in (0.0, 0.05):
                timings = {}
                for path, wrap in (("written out", lambda m: m), ("autograd", nn.Sequential)):
                    model = wrap(mlp(64, (32,), 10, generator=torch.Generator().manual_seed(2)))
                    secs, ran, weights = _train(model, data, batch, sam_rho, epochs)
                    timings[path] = (secs / (ran * -(-n // batch)), weights)
                fast, slow = timings["written out"][0], timings["autograd"][0]
                pairs = zip(timings["written out"][1], timings["autograd"][1], strict=True)
                same = all(torch.equal(a, b) for a, b in pairs)
                rows.append([batch, sam_rho, f"{1e6 * fast:.0f}", f"{1e6 * slow:.0f}", f"{slow / fast:.1f}×", same])
    finally:
        torch.set_num_threads(previous)
    print(
        tabulate(
            rows,
            headers=["batch", "SAM ρ", "written out µs/step", "autograd µs/step", "speed-up", "same bits"],
            tablefmt="github",
        )
    )
    print(f"\n64-32-10 ReLU MLP, n = {n}, {epochs} epochs, one thread (a step includes its share of the evaluations).")


if __name__ == "__main__":
    main()
