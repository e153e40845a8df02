"""Why ``evaluators.scores`` writes its bootstraps and mutual information out: the libraries measured.

    python -m benchmarks.scoring_libraries [--quick]

* Bootstrap of Kendall τ over models: ``scipy.stats.bootstrap`` (paired, percentile) against
  :func:`evaluators.scores.bootstrap_kendall` on small samples whose gap has ties (as a
  population's gaps do): how often each returns no interval, and the time per call.
* Mutual information of a 2 × 3 contingency table (the CMI's cells):
  ``sklearn.metrics.mutual_info_score`` (nats, converted to bits) against
  ``evaluators.scores._mutual_information``: bit-equal tables, largest difference, time per call.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import scipy
import sklearn
from scipy import stats
from sklearn.metrics import mutual_info_score
from tabulate import tabulate

from evaluators.scores import _mutual_information, bootstrap_kendall


def _timed(fn, *args, **kwargs):
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - start


def bootstrap_rows(samples: int, models: int, resamples: int) -> list[list]:
    rng = np.random.default_rng(0)
    no_ci = {"scipy.stats.bootstrap": 0, "bootstrap_kendall": 0}
    seconds = {name: 0.0 for name in no_ci}
    for k in range(samples):
        x = rng.normal(size=models)
        y = rng.integers(0, 3, size=models).astype(float)  # a gap with ties, as a small population's
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res, s = _timed(
                stats.bootstrap,
                (x, y),
                lambda a, b: stats.kendalltau(a, b).statistic,
                paired=True,
                vectorized=False,
                n_resamples=resamples,
                method="percentile",
                random_state=k,
            )
        no_ci["scipy.stats.bootstrap"] += not np.isfinite(res.confidence_interval.low)
        seconds["scipy.stats.bootstrap"] += s
        (_, lo, _), s = _timed(bootstrap_kendall, x, y, np.random.default_rng(k), resamples=resamples)
        no_ci["bootstrap_kendall"] += not np.isfinite(lo)
        seconds["bootstrap_kendall"] += s
    return [[name, f"{no_ci[name]}/{samples}", f"{1e3 * seconds[name] / samples:.1f}"] for name in no_ci]


def mutual_information_rows(tables: int) -> list[list]:
    rng = np.random.default_rng(0)
    equal, largest, ours_s, sk_s = 0, 0.0, 0.0, 0.0
    for _ in range(tables):
        t = rng.integers(1, 40, size=(2, 3)).astype(float)
        ours, s = _timed(_mutual_information, t)
        ours_s += s
        nats, s = _timed(mutual_info_score, None, None, contingency=t)
        sk_s += s
        bits = nats / np.log(2)
        equal += ours == bits
        largest = max(largest, abs(ours - bits))
    return [[f"{equal}/{tables}", f"{largest:.1e}", f"{1e6 * ours_s / tables:.0f}", f"{1e6 * sk_s / tables:.0f}"]]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="scipy/scikit-learn against evaluators.scores")
    parser.add_argument("--quick", action="store_true", help="a few samples (a smoke run)")
    args = parser.parse_args(argv)
    samples, tables, resamples = (5, 50, 100) if args.quick else (100, 2000, 1000)
    print(f"scipy {scipy.__version__}, scikit-learn {sklearn.__version__}")
    print(f"\nKendall τ bootstrap, {samples} samples of 8 models, gap with ties, {resamples} resamples")
    print(tabulate(bootstrap_rows(samples, 8, resamples), headers=["method", "no interval", "ms / call"]))
    print(f"\nMutual information of {tables} random 2 × 3 tables")
    headers = ["bit-equal", "max |difference| (bits)", "ours µs / call", "sklearn µs / call"]
    print(tabulate(mutual_information_rows(tables), headers=headers))


if __name__ == "__main__":
    main()
