"""The benchmark's rows (constructions.population_rows), their cache and table (catalogue.population_cache),
the row-level scores (evaluators.scores) and parallel runs."""

import csv
import io
import math

import numpy as np
import pytest

from catalogue import population_cache
from catalogue.claim import ClaimContext
from catalogue.parallel import Execution
from constructions import population_rows
from constructions.populations import Population, XorModel
from evaluators import scores
from evaluators.panel import INVARIANCE

POP = Population(
    base=XorModel(d=6, n=24, width=16, lr=0.1, batch_size=8, max_epochs=500, n_test=100),
    grid={"bias": (False, True), "sam_rho": (0.0, 0.05)},
)


def _ctx(tmp_path, n_jobs=1):
    return ClaimContext("0" * 64, 0, "quick", artifacts=tmp_path, execution=Execution(n_jobs))


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    population_cache._MEMO.clear()
    return population_cache.measure_population(POP, "xor", _ctx(tmp_path_factory.mktemp("bench")), rescale_max=10.0)


def test_rows_cover_the_grid_and_the_panel(rows):
    assert [(r["bias"], r["sam_rho"]) for r in rows] == [(False, 0.0), (False, 0.05), (True, 0.0), (True, 0.05)]
    for r in rows:
        assert r["converged"] and r["measure_failures"] == ""
        assert r["gap"] == pytest.approx(r["test_error"] - r["train_error"])
        for m in population_rows.MEASURES:
            assert f"{m}_err" in r and all(f"{kind}:{m}" in r for kind in population_rows.RESCALINGS)
    assert math.isfinite(rows[0]["symmetry_min_trace"]) and math.isnan(rows[2]["symmetry_min_trace"])  # bias: n/a


@pytest.mark.parametrize("kind", list(population_rows.RESCALINGS))
def test_rescaling_preserves_the_function_and_the_invariant_measures(rows, kind):
    """Invariant measures agree to 1e-6 relative (round-off through HVPs and ascent steps is ~1e-10);
    λ1 and ‖θ‖ change by more than 1% under α ∈ [1/10, 10]."""
    for r in rows:
        assert r["rescale_function_change"] < 1e-12
        for m, expected in INVARIANCE.items():
            before, after = r[m], r[f"{kind}:{m}"]
            if not math.isfinite(before) or expected.get(kind) is not True:
                continue
            assert after == pytest.approx(before, rel=1e-6, abs=1e-12), m
        for m in ("lambda_max", "param_l2_norm"):
            assert abs(r[f"{kind}:{m}"] / r[m] - 1) > 1e-2


@pytest.mark.parametrize("kind", list(population_rows.RESCALINGS))
def test_random_rescaling_draws_one_factor_per_neuron_or_per_layer(kind):
    import torch

    from constructions.nets import mlp

    torch.manual_seed(0)
    net = mlp(4, (5, 6), 2, bias=True).double()
    out = population_rows.random_rescaling(net, kind, 10.0, torch.Generator().manual_seed(1))
    for k in (0, 2):  # the hidden Linear layers: their biases scaled by α
        alpha = out[k].bias / net[k].bias
        assert torch.all((alpha >= 0.1 - 1e-12) & (alpha <= 10 + 1e-12))
        assert (len(set(alpha.tolist())) > 1) == (kind == "neuron_alpha")
    assert torch.allclose(out[0].weight / net[0].weight, (out[0].bias / net[0].bias)[:, None].expand(5, 4))
    x = torch.randn(7, 4, dtype=torch.float64)
    assert torch.allclose(out(x), net(x), rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="unknown rescaling"):
        population_rows.random_rescaling(net, "permutation", 10.0, torch.Generator())


def test_cached_models_are_not_retrained(tmp_path, rows, monkeypatch):
    ctx = _ctx(tmp_path)
    population_cache._MEMO.clear()
    first = population_cache.measure_population(POP, "xor", ctx, rescale_max=10.0)
    population_cache._MEMO.clear()  # a new process: only the files remain

    def fail(task):
        raise AssertionError("retrained a cached model")

    monkeypatch.setattr(population_cache, "measure_member", fail)
    again = population_cache.measure_population(POP, "xor", ctx, rescale_max=10.0)
    assert [r["key"] for r in again] == [r["key"] for r in first]
    assert again[0]["lambda_max"] == first[0]["lambda_max"] == rows[0]["lambda_max"]
    bigger = Population(base=POP.base, grid={**POP.grid, "lr": (0.1, 0.05)})
    with pytest.raises(AssertionError, match="retrained"):  # only the new members are trained
        population_cache.measure_population(bigger, "xor", ctx, rescale_max=10.0)


def _same_rows(a_rows, b_rows):
    for a, b in zip(a_rows, b_rows, strict=True):
        assert {k: v for k, v in a.items() if k != "seconds"} == pytest.approx(
            {k: v for k, v in b.items() if k != "seconds"}, nan_ok=True
        )


def test_loky_workers_give_the_same_rows(tmp_path, rows):
    population_cache._MEMO.clear()
    _same_rows(rows, population_cache.measure_population(POP, "xor", _ctx(tmp_path, n_jobs=2), rescale_max=10.0))


def test_dask_workers_give_the_same_rows(tmp_path, rows):
    distributed = pytest.importorskip("dask.distributed")
    population_cache._MEMO.clear()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True) as cluster:
        ctx = ClaimContext(
            "0" * 64, 0, "quick", artifacts=tmp_path, execution=Execution(2, "dask", cluster.scheduler_address)
        )
        _same_rows(rows, population_cache.measure_population(POP, "xor", ctx, rescale_max=10.0))


def test_population_table_is_tidy_csv(rows):
    text = population_cache.population_table(rows, POP.hyperparameters)
    table = list(csv.DictReader(io.StringIO(text)))
    assert len(table) == 4
    header = list(table[0])
    assert header[:5] == ["spec_hash", "seed", "kind", "bias", "sam_rho"]
    for col in ("train_loss", "test_loss", "train_error", "test_error", "gap", "lambda_max", "lambda_max_err"):
        assert col in header
    assert table[2]["symmetry_min_trace"] == ""  # not applicable: empty, not "nan"
    assert float(table[0]["lambda_max"]) == rows[0]["lambda_max"]


def test_scores_use_included_models_only(rows):
    broken = [dict(r) for r in rows]
    broken[0]["converged"] = False
    s = scores.score_population(broken, POP.hyperparameters, "lambda_max", np.random.default_rng(0), 50)
    assert s.models == 3


def test_a_benchmark_claim_writes_its_table_through_the_runner(tmp_path):
    from catalogue import registry, runner

    population_cache._MEMO.clear()  # so every model is trained and written under tmp_path
    claim = registry.get("benchmark.sharpness-predicts-gap")
    params = claim.params(populations={"xor": POP}, min_models=4, resamples=50)
    (record,) = runner.run_jobs(runner.plan_jobs([claim], "custom", 0, params), tmp_path)
    assert record.error is None, record.error
    summary = record.evidence["populations"]["xor"]
    assert summary["models"] == summary["included"] + summary["excluded"] == 4
    table = list(csv.DictReader(open(summary["table"], encoding="utf-8")))
    assert len(table) == 4 and {r["spec_hash"] for r in table} == {r["spec_hash"] for r in record_rows(tmp_path)}


def record_rows(out_dir):
    import json

    return [json.loads(p.read_text()) for p in (out_dir / "benchmark" / "models").glob("*.json")]


def test_rescaled_tau_pairs_the_models_and_failures_are_counted(rows):
    broken = [dict(r) for r in rows]
    broken[1]["neuron_alpha:lambda_max"] = math.nan
    broken[1]["failed_measures"] = "neuron_alpha:lambda_max trace"
    before, after, models = scores.rescaled_tau(broken, "lambda_max", "neuron_alpha")
    assert models == 3
    rest = [r for i, r in enumerate(rows) if i != 1]
    gap = np.array([r["gap"] for r in rest])
    from evaluators.scores import kendall_tau

    assert before == kendall_tau(np.array([r["lambda_max"] for r in rest]), gap)
    assert after == kendall_tau(np.array([r["neuron_alpha:lambda_max"] for r in rest]), gap)
    assert scores.measure_failures(broken) == {"neuron_alpha:lambda_max": 1, "trace": 1}


@pytest.mark.parametrize(
    ("field", "value"),
    [("oracle_measure", "gap"), ("shuffled_measures", ("trace", "sharpest")), ("baselines", ("l3_norm",))],
)
def test_a_control_or_panel_naming_an_unknown_measure_is_rejected_with_its_field(field, value):
    from pydantic import ValidationError

    from catalogue.claims.benchmark import SharpnessParams

    with pytest.raises(ValidationError, match=field):
        SharpnessParams(**{field: value})
