"""Where the measure benchmark's time goes: training a member vs each measure of the panel.

    python -m benchmarks.populations              # 2 members of each full-mode population
    python -m benchmarks.populations --quick      # 1 member of each quick population (the tests)

For the first ``--members`` members of each population of ``benchmark.*`` (full or quick grid),
times training to the stopping criterion and then every measure of the panel that applies, on one
thread (as the benchmark runs them). A model costs its training plus three panels (as trained and
after the two rescalings); the last table projects a population's wall time over ``--jobs``
workers from the mean of the members timed (the first members of a grid are not a random sample:
read the projection as an order of magnitude, the catalogue's own run is the measurement).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from tabulate import tabulate
from threadpoolctl import threadpool_limits

from constructions.population_grids import FULL_POPULATIONS, QUICK_POPULATIONS
from constructions.population_rows import RESCALINGS
from constructions.populations import train_model
from evaluators import Objective
from evaluators.panel import panel_for


def time_member(spec, seed: int) -> tuple[float, int, bool, dict[str, float]]:
    """(training seconds, epochs, converged, {measure: seconds}) for one member."""
    start = time.perf_counter()
    trained = train_model(spec, torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed + 1))
    train_s = time.perf_counter() - start
    obj = Objective(trained.model, (trained.x, trained.y))
    costs = {}
    for measure in panel_for(obj):
        start = time.perf_counter()
        measure.compute(obj, seed)
        costs[measure.name] = time.perf_counter() - start
    return train_s, trained.run.epochs, trained.run.converged, costs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the quick populations, one member each")
    parser.add_argument("--members", type=int, default=None, help="members timed per population (default 2)")
    parser.add_argument("--jobs", type=int, default=2, help="workers for the projection (default 2)")
    args = parser.parse_args(argv)
    populations = QUICK_POPULATIONS if args.quick else FULL_POPULATIONS
    members = args.members or (1 if args.quick else 2)
    torch.set_num_threads(1)
    per_measure: dict[str, dict[str, list[float]]] = {}
    summary = []
    with threadpool_limits(limits=1):
        for name, population in populations.items():
            trains, panels, epochs = [], [], []
            for k, spec in enumerate(population.members()[:members]):
                train_s, n_epochs, converged, costs = time_member(spec, k)
                trains.append(train_s)
                panels.append(sum(costs.values()))
                epochs.append(f"{n_epochs}{'' if converged else ' (not converged)'}")
                for measure, seconds in costs.items():
                    per_measure.setdefault(measure, {}).setdefault(name, []).append(seconds)
            per_model = statistics.mean(trains) + (1 + len(RESCALINGS)) * statistics.mean(panels)
            summary.append(
                [
                    name,
                    len(population),
                    ", ".join(epochs),
                    f"{statistics.mean(trains):.2f}",
                    f"{statistics.mean(panels):.2f}",
                    f"{per_model:.2f}",
                    f"{len(population) * per_model / args.jobs / 60:.1f}",
                ]
            )
    names = list(populations)
    rows = [
        [measure, *(f"{statistics.mean(by_pop[n]):.3f}" if n in by_pop else "n/a" for n in names)]
        for measure, by_pop in per_measure.items()
    ]
    print(f"seconds per measure, one thread (mean over the first {members} member(s) of each population)\n")
    print(tabulate(rows, headers=["measure", *names], tablefmt="github"))
    print()
    print(
        tabulate(
            summary,
            headers=[
                "population",
                "models",
                "epochs (timed members)",
                "train s",
                "panel s",
                f"s per model (train + {1 + len(RESCALINGS)} panels)",
                f"projected min at --jobs {args.jobs}",
            ],
            tablefmt="github",
        )
    )


if __name__ == "__main__":
    main()
