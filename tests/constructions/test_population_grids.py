"""The benchmark's grids: which axes change the training data."""

import pytest
import torch

from catalogue.population_cache import member_task
from constructions.population_grids import FULL_POPULATIONS, QUICK_POPULATIONS, data_axes
from constructions.populations import build_member

GRIDS = {
    **{f"full-{k}": v for k, v in FULL_POPULATIONS.items()},
    **{f"quick-{k}": v for k, v in QUICK_POPULATIONS.items()},
}


@pytest.mark.parametrize("name", sorted(GRIDS))
def test_every_grid_crosses_data_axes_with_training_axes(name):
    axes = data_axes(GRIDS[name])
    assert axes and set(axes) < set(GRIDS[name].hyperparameters)


@pytest.mark.parametrize("name", sorted(GRIDS))
def test_members_of_one_data_cell_are_trained_on_the_same_data(name):
    """Every field that changes the data is a data axis: the first and last members of a cell (they
    differ in every training axis) get the same data seed from the cache's seeding, and from it the
    same inputs and labels."""
    population = GRIDS[name]
    axes = data_axes(population)
    cells: dict[tuple, list] = {}
    for member in population.members():
        cells.setdefault(tuple(getattr(member, a) for a in axes), []).append(member)
    for members in cells.values():
        first, last = members[0], members[-1]
        assert {h for h in population.hyperparameters if getattr(first, h) != getattr(last, h)} == set(
            population.hyperparameters
        ) - set(axes)
        seeds = [member_task(m, 0, 10.0).seeds["data"] for m in (first, last)]
        assert seeds[0] == seeds[1]
        built = [
            build_member(m, torch.Generator().manual_seed(seeds[0]), torch.Generator().manual_seed(1))
            for m in (first, last)
        ]
        for a, b in zip(built[0][1:5], built[1][1:5], strict=True):  # x, y, x_test, y_test
            assert torch.equal(a, b)
