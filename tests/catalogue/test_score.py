"""`catalogue score`: a user's measure through the invariance audit, the counterexample pairs and a
population; built-in measures reproduce the catalogue's own numbers; bad measures are one-line errors."""

import json
import math
import re

import pytest

from catalogue import registry, runner, store
from catalogue.cli import main
from catalogue.score import ScoreSettings, benchmark_part, counterexample_part, invariance_part
from catalogue.user_measures import MeasureSpecError, load_measure
from constructions.population_rows import one_thread
from constructions.populations import Population, XorModel
from evaluators import Estimate

POP = {
    "xor": Population(
        base=XorModel(d=6, n=24, width=16, lr=0.1, batch_size=8, max_epochs=500, n_test=100),
        grid={"bias": (False, True), "sam_rho": (0.0, 0.05)},
    )
}
USER = """
import math
from evaluators import parameter_norm, hessian_trace

def norm(obj, seed):
    return parameter_norm(obj).value

def trace(obj, seed):
    return hessian_trace(obj, method="exact")

def constant(obj, seed):
    return 1.0

def flaky(obj, seed):
    if obj.num_params > 100:
        raise RuntimeError("too big for me")
    return 1.0

def two_args_missing(obj):
    return 0.0

not_callable = 3
"""


@pytest.fixture()
def user_file(tmp_path):
    path = tmp_path / "mine.py"
    path.write_text(USER)
    return path


def test_a_panel_measure_scored_reproduces_its_row_of_the_invariance_matrix(tmp_path):
    claim = registry.get("invariance.measure-symmetry-matrix")
    runner.run_jobs(runner.plan_jobs([claim], "quick", 0), tmp_path)
    evidence = store.scan(tmp_path).records[claim.id].evidence
    with one_thread():  # as score_measures and the runner compute
        part = invariance_part(load_measure("lambda_max"), ScoreSettings(mode="quick"))
    for symmetry in ("layer_T_alpha", "neuron_alpha", "permutation", "input_scale", "bn_scale", "ln_scale"):
        key = f"lambda_max under {symmetry}"
        recorded = evidence["predicted_invariant"].get(key) or evidence["predicted_not_invariant"][key]
        assert part["by_symmetry"][symmetry]["relative_change"] == recorded["relative_change"]
        assert part["by_symmetry"][symmetry]["change_beyond_noise"] == recorded["change_beyond_noise"]
    assert part["by_symmetry"]["permutation"]["summary"] == "invariant"
    assert part["by_symmetry"]["layer_T_alpha"]["summary"] == "not invariant"
    # the panel's theory for λ1 (permutations keep it, T_α does not) travels with the measure
    assert part["by_symmetry"]["permutation"]["matches_theory"] is True
    assert part["by_symmetry"]["layer_T_alpha"]["theory"] == "not invariant"


def test_a_user_measure_gets_the_panel_measures_scores_exactly_from_stored_weights_or_retraining(
    tmp_path, user_file, monkeypatch
):
    """A deterministic user measure equal to a panel measure gets the panel's τ, CI, Ψ and CMI bit for
    bit: first from the weights stored beside the rows (no training), then with them deleted (every
    included member trained again from its seeds)."""
    import catalogue.score as score
    from catalogue import population_cache

    population_cache._MEMO.clear()  # rows another test memoized would skip the training that writes weights
    settings = ScoreSettings(mode="quick", records=tmp_path / "records", populations=POP)
    panel = benchmark_part(load_measure("param_l2_norm"), settings)["populations"]["xor"]
    assert panel["builtin_tau"]["param_l2_norm"] == [panel["tau"], *panel["tau_ci"]]
    weights = list((tmp_path / "records" / "benchmark" / "models").glob("*.pt"))
    assert len(weights) == 4

    def no_training(task):
        raise AssertionError("trained a member whose weights are stored")

    with monkeypatch.context() as patch:
        patch.setattr(score, "trained_member", no_training)
        stored = benchmark_part(load_measure(f"{user_file}:norm"), settings)["populations"]["xor"]
    for path in weights:
        path.unlink()
    retrained = benchmark_part(load_measure(f"{user_file}:norm"), settings)["populations"]["xor"]
    for key in ("tau", "tau_ci", "psi", "cmi", "models"):
        assert stored[key] == panel[key] == retrained[key], key
    assert sorted(p.name for p in weights if p.is_file()) == sorted(p.name for p in weights)  # stored again
    with monkeypatch.context() as patch:
        patch.setattr(score, "trained_member", no_training)
        again = benchmark_part(load_measure(f"{user_file}:norm"), settings)["populations"]["xor"]
    assert again["tau"] == panel["tau"]


def test_quick_scoring_a_new_measure_trains_no_population_model(user_file, monkeypatch):
    """#19's promise on a fresh clone: the quick populations' rows and trained weights are committed
    in report/records, so a measure the catalogue has never seen is computed on them. A failure
    here means those rows went stale (their trainer, data or panel changed): `catalogue score
    examples/my_measure.py:normalized_lambda_max --quick` rewrites them, to be committed
    (`git add -f` for the weights)."""
    import catalogue.population_cache as population_cache
    import catalogue.score as score

    def no_training(*_):
        raise AssertionError("trained a quick population member: its committed row or weights are stale")

    population_cache._MEMO.clear()
    monkeypatch.setattr(score, "trained_member", no_training)
    monkeypatch.setattr(population_cache, "measure_member", no_training)
    part = benchmark_part(load_measure(f"{user_file}:norm"), ScoreSettings(mode="quick"))
    assert set(part["populations"]) == {"digits", "xor", "multi_index"}
    assert all(math.isfinite(p["tau"]) for p in part["populations"].values())


def test_counterexample_outcomes_can_come_out_every_way(user_file):
    settings = ScoreSettings(mode="quick")
    constant = counterexample_part(load_measure(f"{user_file}:constant"), settings)["pairs"]
    assert constant["dinh-t-alpha"]["outcome"] == "agrees"  # one function, one value
    assert all(constant[name]["outcome"] == "tie" for name in ("wen-bias", "wen-simln", "vardhan-misaligned"))
    norm = counterexample_part(load_measure("param_l2_norm"), settings)["pairs"]
    assert norm["dinh-t-alpha"]["outcome"] == "fooled"  # T_α changes ‖θ‖, not the function
    assert norm["wen-bias"]["outcome"] == "agrees"  # the memorizer's weights are larger
    trace = counterexample_part(load_measure(f"{user_file}:trace"), settings)["pairs"]
    assert trace["wen-bias"]["outcome"] == "tie"  # Thm 4.1: both attain the bound 4√(d+1)
    for name, pair in norm.items():  # "better" is measured, not assumed
        if name != "dinh-t-alpha":
            assert pair["test_loss_better"] < pair["test_loss_worse"]
    assert norm["dinh-t-alpha"]["test_loss_better"] == pytest.approx(norm["dinh-t-alpha"]["test_loss_worse"], rel=1e-12)


def test_an_installed_package_registers_a_measure_by_entry_point(monkeypatch, user_file):
    import importlib.metadata

    monkeypatch.syspath_prepend(str(user_file.parent))
    point = importlib.metadata.EntryPoint("my-norm", "mine:norm", "flatness_catalogue.measures")
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [point] if group == point.group else [])
    assert load_measure("my-norm").name == "my-norm"


@pytest.mark.parametrize(
    "spec, named",
    [
        ("does/not/exist.py:f", "no such file"),
        ("no_such_module_xyz:f", "cannot import"),
        ("not a measure", "not a panel measure"),
        ("{file}:two_args_missing", "measure(obj: Objective, seed: int)"),
        ("{file}:not_callable", "not callable"),
        ("{file}:absent", "has no attribute"),
    ],
)
def test_bad_measures_are_one_line_errors_with_exit_2(tmp_path, capsys, user_file, spec, named):
    spec = spec.format(file=user_file)
    with pytest.raises(MeasureSpecError, match=re.escape(named)):
        load_measure(spec)
    assert main(["score", spec, "--quick", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and named in err


def test_a_measure_that_fails_on_some_models_is_recorded_and_the_scorecard_still_written(tmp_path, user_file):
    from catalogue.score import score_measures

    settings = ScoreSettings(mode="quick", records=tmp_path / "records", populations=POP)
    card = score_measures([f"{user_file}:flaky"], settings, tmp_path / "out")[0]
    errors = [p for p in card["counterexamples"]["pairs"].values() if p["outcome"] == "error"]
    assert errors and "too big for me" in errors[0]["error"]
    xor = card["benchmark"]["populations"]["xor"]
    assert xor["failed_models"] > 0 and "too big for me" in xor["failures"][0]
    assert (tmp_path / "out" / "scorecard.md").read_text().count("## `") == 1
    stored = json.loads(next((tmp_path / "out").glob("scorecard-*.json")).read_text())
    assert stored["measure"] == f"{user_file}:flaky"


def test_a_user_measure_declares_its_theory_once(tmp_path):
    path = tmp_path / "theory.py"
    path.write_text(
        "def m(obj, seed):\n    return 1.0\nm.theory = {'permutation': True, 'input_scale': None}\n"
        "def bad(obj, seed):\n    return 1.0\nbad.theory = {'permutation': 'yes'}\n"
    )
    assert load_measure(f"{path}:m").theory == {"permutation": True, "input_scale": None}
    with pytest.raises(MeasureSpecError, match="theory must map"):
        load_measure(f"{path}:bad")


def test_a_float_becomes_an_estimate_and_nan_is_an_error(user_file):
    assert load_measure(f"{user_file}:constant").compute(None, 0) == Estimate(1.0, 0.0, "none")
    path = user_file.parent / "nan_measure.py"
    path.write_text("def f(obj, seed):\n    return float('nan')\n")
    with pytest.raises(ValueError, match="returned nan"):
        load_measure(f"{path}:f").compute(None, 0)
    with pytest.raises(MeasureSpecError, match="measure\\(obj"):
        load_measure("math:isnan")  # one argument, not (obj, seed)
