"""Where work runs: in process, on local loky workers, or on a dask cluster (one place for all three)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["Execution", "dask_client", "map_unordered"]


@dataclass(frozen=True)
class Execution:
    """How many workers, on which joblib backend (``loky`` or ``dask``), and an optional dask scheduler."""

    n_jobs: int = 1
    backend: str = "loky"
    scheduler: str | None = None

    def __post_init__(self) -> None:
        if self.backend not in ("loky", "dask"):
            raise ValueError(f"backend must be 'loky' or 'dask', got {self.backend!r}")
        if self.n_jobs == 0 or self.n_jobs < -1:
            raise ValueError(f"n_jobs must be a positive integer or -1, got {self.n_jobs}")

    @property
    def serial(self) -> bool:
        return self.backend == "loky" and self.n_jobs == 1


@contextlib.contextmanager
def dask_client(scheduler: str | None):
    """A client of ``scheduler``, or of a 2-worker LocalCluster when none is given."""
    from dask.distributed import Client, LocalCluster

    if scheduler:
        with Client(scheduler) as client:
            yield client
    else:
        with (
            LocalCluster(n_workers=2, threads_per_worker=1, processes=True) as cluster,
            Client(cluster) as client,
        ):
            yield client


def map_unordered(fn: Callable[..., Any], items: Iterable[Any], execution: Execution) -> Iterator[Any]:
    """``fn(item)`` for every item, yielded as each finishes (in order when serial)."""
    items = list(items)
    if not items:
        return
    if execution.serial:
        for item in items:
            yield fn(item)
        return
    from joblib import Parallel, delayed, parallel_config

    tasks = (delayed(fn)(item) for item in items)
    if execution.backend == "dask":
        with dask_client(execution.scheduler), parallel_config(backend="dask"):
            yield from Parallel(n_jobs=execution.n_jobs, return_as="generator_unordered")(tasks)
    else:
        workers = execution.n_jobs if execution.n_jobs > 0 else os.cpu_count() or 1
        yield from Parallel(n_jobs=workers, backend="loky", return_as="generator_unordered")(tasks)
