"""Score a flatness measure against the whole catalogue: symmetries, counterexamples, populations.

For one measure (:mod:`catalogue.user_measures`), three parts, each with a one-line verdict:

* **invariance**: its row of the invariance audit (the nets, α grid, seeds and tolerances of
  ``invariance.measure-symmetry-matrix`` in the chosen mode), every symmetry where it applies,
  summarized as *invariant* (change beyond noise ≤ ``invariant_rtol``), *not invariant*
  (≥ ``changes_at_least``), *unclear* (between) or *n.a.*;
* **counterexamples**: :func:`constructions.counterexamples.counterexample_pairs`, the measure's
  value on both solutions of each pair (larger = sharper) and whether it calls the one with the
  smaller test loss flatter: *agrees*, *fooled*, *tie* (equal within 1e-9 relative, or within 4
  standard errors for Monte Carlo estimates); on the one-function pair, *fooled* when the two
  parametrizations get values more than ``invariant_rtol`` apart;
* **benchmark**: Kendall τ with the gap (95% bootstrap CI), granulated Ψ and CMI on each population
  of ``benchmark.sharpness-predicts-gap``, on fixed data as its leaderboard scores them (and pooled
  over the data axes, for reference; same members, seeds and bootstrap draws), beside the
  panel's measures, from the stored rows, and the user's measure on the stored trained weights
  (a member without stored weights is trained again from its seeds, the same model, and its
  weights are stored beside its row for the next measure).

A built-in measure scored this way gives the numbers of the leaderboard and of the invariance
matrix (tested). One JSON record per measure and ``scorecard.md`` with a figure go to ``out``.
"""

from __future__ import annotations

import functools
import io
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tabulate import tabulate

from catalogue import registry, seeding
from catalogue.atomic import atomic_write_bytes, atomic_write_text
from catalogue.claim import ClaimContext, jsonable
from catalogue.parallel import Execution, map_unordered
from catalogue.population_cache import (
    column_scores,
    measure_population,
    member_task,
    population_scores,
    stored_weights,
)
from catalogue.runner import Job
from catalogue.user_measures import load_measure
from constructions.counterexamples import counterexample_pairs
from constructions.invariance_audit import SYMMETRIES, audit_measures
from constructions.population_grids import data_axes
from constructions.population_rows import MEASURES, one_thread, stored_member, trained_member
from evaluators import Objective
from evaluators.panel import Measure
from evaluators.scores import included

__all__ = ["ScoreSettings", "score_measures"]

INVARIANCE_CLAIM = "invariance.measure-symmetry-matrix"
BENCHMARK_CLAIM = "benchmark.sharpness-predicts-gap"
TIE_RTOL = 1e-9  # two exact values this close are one value (round-off of the constructions)
NOISE_MULTIPLE = 4.0  # Monte Carlo values within 4 standard errors are not told apart
ONE_FUNCTION_RTOL = 1e-6  # the invariance audit's tolerance: float64 round-off through a map


@dataclass(frozen=True)
class ScoreSettings:
    mode: str = "full"
    seed: int = 0
    records: Path | None = Path("report/records")  # where stored benchmark rows are read and written
    execution: Execution = Execution()
    progress: bool = False
    populations: dict | None = None  # instead of the benchmark claim's (tests, a user's own grid)


def _context(claim_id: str, settings: ScoreSettings, artifacts: Path | None = None) -> tuple[Any, ClaimContext]:
    """The claim's parameters in the chosen mode and the context its own run would get."""
    claim = registry.get(claim_id)
    spec = claim.spec_for(settings.mode)
    job = Job(claim.id, seeding.canonical_json(spec), settings.mode, settings.seed)
    ctx = ClaimContext(
        job.spec_hash, settings.seed, settings.mode, artifacts, settings.execution, progress=settings.progress
    )
    return spec, ctx


def _summary(change: float, p) -> str:
    if math.isnan(change):
        return "failed"
    if change <= p.invariant_rtol:
        return "invariant"
    return "not invariant" if change >= p.changes_at_least else "unclear"


def invariance_part(measure: Measure, settings: ScoreSettings) -> dict[str, Any]:
    """The measure's row of the invariance audit, with a word per symmetry."""
    from catalogue.claims.invariance import audit_nets

    p, ctx = _context(INVARIANCE_CLAIM, settings)
    nets, _ = audit_nets(p, ctx)
    try:
        audit = audit_measures(
            [measure],
            nets,
            p.alphas,
            seed=ctx.int_seed("measures"),
            draws=lambda symmetry, tag: ctx.generator(f"draws-{symmetry}-{tag}"),
            stderr_multiple=p.stderr_multiple,
        )
    except Exception as exc:  # the user's measure, whatever it raises
        return {"error": f"{type(exc).__name__}: {exc}", "verdict": "error: the measure failed on the audit's nets"}
    changes = audit.change.get(measure.name, {})
    beyond = audit.beyond_noise.get(measure.name, {})
    by_symmetry = {
        s: (
            {"relative_change": changes[s], "change_beyond_noise": beyond[s], "summary": _summary(beyond[s], p)}
            if s in changes
            else {"summary": "n.a."}
        )
        for s in SYMMETRIES
    }
    for symmetry, entry in by_symmetry.items():  # what the measure's own theory says, where it says something
        expected = measure.theory.get(symmetry)
        if expected is not None and entry["summary"] in ("invariant", "not invariant"):
            entry["theory"] = "invariant" if expected else "not invariant"
            entry["matches_theory"] = entry["summary"] == entry["theory"]
    groups: dict[str, list[str]] = {}
    for symmetry, entry in by_symmetry.items():
        groups.setdefault(entry["summary"], []).append(symmetry)
    phrases = [
        f"invariant under {', '.join(groups.get('invariant', [])) or 'none'}",
        f"changes under {', '.join(groups.get('not invariant', [])) or 'none'}",
        *(f"{word} under {', '.join(groups[word])}" for word in ("unclear", "failed") if word in groups),
    ]
    verdict = "; ".join(phrases) + f" (α over {min(p.alphas):g}…{max(p.alphas):g}, {settings.mode} mode)"
    return {"by_symmetry": by_symmetry, "verdict": verdict}


def _compare(pair, better, worse, one_function_rtol: float) -> str:
    """agrees / fooled / tie: does the measure call the better-generalizing solution flatter?"""
    noise = NOISE_MULTIPLE * float(np.hypot(better.error, worse.error)) if better.error_kind == "stderr" else 0.0
    if pair.same_function:
        apart = abs(worse.value - better.value) > max(noise, one_function_rtol * abs(better.value))
        return "fooled" if apart else "agrees"
    if abs(better.value - worse.value) <= max(noise, TIE_RTOL * max(abs(better.value), abs(worse.value))):
        return "tie"
    return "agrees" if better.value < worse.value else "fooled"


@functools.lru_cache(maxsize=2)
def _pairs(seed: int) -> tuple:
    """The pairs of one user seed, built once per process (measures read them, never change them)."""
    return tuple(
        counterexample_pairs(
            lambda name: seeding.torch_generator(seeding.derive_seed("counterexamples", 0, seed, name))
        )
    )


def counterexample_part(measure: Measure, settings: ScoreSettings) -> dict[str, Any]:
    """The measure on both solutions of every pair; which it calls flatter."""
    pairs = _pairs(settings.seed)
    seed = seeding.derive_seed("counterexamples", 0, settings.seed, f"measure:{measure.name}") % 2**31
    out = {}
    for pair in pairs:
        entry: dict[str, Any] = {
            "source": pair.source,
            "better": pair.better_label,
            "worse": pair.worse_label,
            "test_loss_better": pair.test_loss_better,
            "test_loss_worse": pair.test_loss_worse,
        }
        if not (measure.applies(pair.better) and measure.applies(pair.worse)):
            out[pair.name] = {**entry, "outcome": "n.a."}
            continue
        try:
            better, worse = measure.compute(pair.better, seed), measure.compute(pair.worse, seed)
        except Exception as exc:
            out[pair.name] = {**entry, "outcome": "error", "error": f"{type(exc).__name__}: {exc}"}
            continue
        entry.update(value_better=better.value, value_worse=worse.value, error_better=better.error)
        entry["error_worse"] = worse.error
        out[pair.name] = {**entry, "outcome": _compare(pair, better, worse, ONE_FUNCTION_RTOL)}
    fooled = [name for name, e in out.items() if e["outcome"] == "fooled"]
    decided = [name for name, e in out.items() if e["outcome"] in ("agrees", "fooled")]
    verdict = f"fooled by {len(fooled)} of {len(decided)} decided pairs" + (f" ({', '.join(fooled)})" if fooled else "")
    return {"pairs": out, "verdict": verdict}


def _user_value(task, measure_spec: str, seed: int, weights: dict | None) -> dict[str, Any]:
    """The user's measure on one included member (in a worker): from its stored weights, or
    trained again from its seeds where none are stored."""
    measure = load_measure(measure_spec)
    value = error = math.nan
    failure = ""
    with one_thread():
        model = None
        if weights is not None:
            try:
                model, x, y = stored_member(task, weights)
            except (RuntimeError, KeyError):  # weights that do not fit the net: train it again instead
                model = None
        trained_weights = None
        if model is None:  # the same model, from its seeds
            trained = trained_member(task)
            model, x, y = trained.model, trained.x, trained.y
            trained_weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
        obj = Objective(model, (x, y))
        try:
            if measure.applies(obj):
                est = measure.compute(obj, seed)
                value, error = float(est.value), float(est.error)
        except Exception as exc:
            failure = f"{type(exc).__name__}: {exc}"
    return {"key": task.key, "value": value, "error": error, "failure": failure, "weights": trained_weights}


def _star_user_value(job) -> dict[str, Any]:
    return _user_value(*job)


def _store_weights(ctx: ClaimContext, key: str, weights: dict | None) -> None:
    """Weights a member was trained again for go beside its row, so the next measure loads them."""
    row = None if ctx.artifacts is None else ctx.artifacts / "benchmark" / "models" / f"{key}.json"
    if weights is None or row is None or not row.is_file():
        return
    buffer = io.BytesIO()
    torch.save(weights, buffer)
    atomic_write_bytes(row.with_suffix(".pt"), buffer.getvalue())


def _member_values(population, kept, measure: Measure, ctx: ClaimContext, rescale_max: float) -> dict[str, dict]:
    """The user's measure on every included member, keyed like the rows."""
    wanted = {row["key"] for row in kept}
    jobs = []
    for member in population.members():
        task = member_task(member, ctx.seed, rescale_max)
        if task.key in wanted:
            seed = seeding.derive_seed(task.spec_hash, 0, ctx.seed, f"measure:{measure.name}") % 2**31
            jobs.append((task, measure.name, seed, stored_weights(ctx, task.key)))
    from tqdm import tqdm

    values = {}
    with tqdm(total=len(jobs), desc=f"score {population.base.kind}", unit="model", disable=not ctx.progress) as bar:
        for value in map_unordered(_star_user_value, jobs, ctx.execution):
            _store_weights(ctx, value["key"], value.pop("weights"))
            values[value["key"]] = value
            bar.update(1)
    return values


def benchmark_part(measure: Measure, settings: ScoreSettings) -> dict[str, Any]:
    """τ, Ψ and CMI of the measure on each population, on fixed data as the leaderboard scores (and
    pooled over the data axes, for reference), and its rank among the panel's by |τ|."""
    p, ctx = _context(BENCHMARK_CLAIM, settings, artifacts=settings.records)
    out = {}
    for name, population in (settings.populations or p.populations).items():
        rows = measure_population(population, name, ctx, rescale_max=p.rescale_max)
        hyper, axes = population.hyperparameters, data_axes(population)
        kept = included(rows)
        pooled_builtin, builtin = population_scores(kept, hyper, axes, ctx.seed, p.resamples)
        column = measure.name
        if column in MEASURES:  # a panel measure: its scores are the leaderboard's
            pooled, scores, failures = pooled_builtin[column], builtin[column], []
        else:  # bootstrapped on the streams a panel column gets
            values = _member_values(population, kept, measure, ctx, p.rescale_max)
            kept = [{**row, column: values[row["key"]]["value"]} for row in kept]
            failures = [values[r["key"]]["failure"] for r in kept if values[r["key"]]["failure"]]
            pooled, scores = column_scores(kept, hyper, axes, column, ctx.seed, p.resamples)
        others = {m: s.tau[0] for m, s in builtin.items() if m != column and math.isfinite(s.tau[0])}
        rank = 1 + sum(abs(t) > abs(scores.tau[0]) for t in others.values()) if math.isfinite(scores.tau[0]) else None
        out[name] = {
            "tau": scores.tau[0],
            "tau_ci": [scores.tau[1], scores.tau[2]],
            "psi": scores.psi.psi,
            "cmi": scores.cmi.value,
            "models": scores.models,
            "data_axes": list(axes),
            "pooled": {
                "tau": pooled.tau[0],
                "tau_ci": [pooled.tau[1], pooled.tau[2]],
                "psi": pooled.psi.psi,
                "cmi": pooled.cmi.value,
            },  # fmt: skip
            "rank_by_abs_tau": rank,
            "of": len(others) + 1,
            "failures": failures[:5],
            "failed_models": len(failures),
            "builtin_tau": {m: list(s.tau) for m, s in builtin.items()},
        }
    ranks = [f"{n}: τ {v['tau']:+.2f}, rank {v['rank_by_abs_tau']}/{v['of']}" for n, v in out.items()]
    return {"populations": out, "verdict": "; ".join(ranks) + f" ({settings.mode} mode, on fixed data)"}


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-")


def score_measures(specs: Sequence[str], settings: ScoreSettings, out: Path) -> list[dict[str, Any]]:
    """Score each measure; write ``scorecard-<measure>.json``, ``scorecard.md`` and its figure."""
    measures = [load_measure(spec) for spec in specs]  # every name resolves before any work starts
    cards = []
    for measure in measures:
        with one_thread():  # as the claims run: BLAS reductions, hence the last bits, depend on threads
            card = {
                "measure": measure.name,
                "mode": settings.mode,
                "seed": settings.seed,
                "invariance": invariance_part(measure, settings),
                "counterexamples": counterexample_part(measure, settings),
                "benchmark": benchmark_part(measure, settings),
            }
        text = json.dumps(jsonable(card), indent=1, allow_nan=False)  # NaN as "nan": strict JSON
        atomic_write_text(out / f"scorecard-{_slug(measure.name)}.json", text)
        cards.append(card)
    write_scorecard(cards, out)
    return cards


def _markdown(card: dict[str, Any]) -> list[str]:
    inv, cx, bench = card["invariance"], card["counterexamples"], card["benchmark"]
    lines = [f"## `{card['measure']}`", "", f"- **Invariance**: {inv['verdict']}"]
    lines += [f"- **Counterexamples**: {cx['verdict']}", f"- **Benchmark**: {bench['verdict']}", ""]
    if "by_symmetry" in inv:
        rows = [
            [s, v["summary"], format(v.get("change_beyond_noise", float("nan")), ".2e")]
            for s, v in inv["by_symmetry"].items()
        ]
        lines += [tabulate(rows, ["symmetry", "", "largest relative change (beyond noise)"], tablefmt="github"), ""]
    rows = [
        [
            name,
            f"{e['better']} vs {e['worse']}",
            format(e.get("value_better", float("nan")), ".4g"),
            format(e.get("value_worse", float("nan")), ".4g"),
            f"{e['test_loss_better']:.3g} vs {e['test_loss_worse']:.3g}",
            e["outcome"] + (f" ({e['error']})" if "error" in e else ""),
        ]
        for name, e in cx["pairs"].items()
    ]
    lines += [tabulate(rows, ["pair", "solutions", "value", "value", "test loss", "outcome"], tablefmt="github"), ""]
    rows = [
        [
            name,
            f"{v['tau']:+.3f} [{v['tau_ci'][0]:+.3f}, {v['tau_ci'][1]:+.3f}]",
            f"{v['psi']:+.3f}",
            f"{v['cmi']:.3f}",
            f"{v['rank_by_abs_tau']}/{v['of']}",
            f"{v['pooled']['tau']:+.3f} [{v['pooled']['tau_ci'][0]:+.3f}, {v['pooled']['tau_ci'][1]:+.3f}]",
            v["models"],
            v["failed_models"],
        ]
        for name, v in bench["populations"].items()
    ]
    headers = [
        "population", "τ on fixed data [95% CI]", "Ψ", "CMI", "rank by |τ|", "τ pooled [95% CI]", "models", "failed"
    ]  # fmt: skip
    lines += [tabulate(rows, headers, tablefmt="github"), ""]
    return lines


def _figure(cards: list[dict[str, Any]], path: Path) -> None:
    """τ per population with its CI: the panel's measures in grey, the scored ones in colour."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    populations = list(cards[0]["benchmark"]["populations"])
    fig, ax = plt.subplots(figsize=(7.5, 3.8), dpi=110)
    for i, name in enumerate(populations):
        builtin = cards[0]["benchmark"]["populations"][name]["builtin_tau"]
        for j, (tau, lo, hi) in enumerate(builtin.values()):
            x = i - 0.3 + 0.4 * j / max(len(builtin) - 1, 1)
            ax.errorbar(x, tau, yerr=[[tau - lo], [hi - tau]], fmt="o", color="0.7", ms=3, lw=0.8)
        for k, card in enumerate(cards):
            v = card["benchmark"]["populations"][name]
            x = i + 0.2 + 0.1 * k
            ax.errorbar(
                x,
                v["tau"],
                yerr=[[v["tau"] - v["tau_ci"][0]], [v["tau_ci"][1] - v["tau"]]],
                fmt="s",
                ms=5,
                color=f"C{k}",
                label=card["measure"] if i == 0 else None,
            )
    ax.axhline(0, color="k", lw=0.5)
    ax.set_xticks(range(len(populations)), populations)
    ax.set(
        ylabel="Kendall τ with the gap, fixed data (95% CI)", title="Scored measures (colour) beside the panel (grey)"
    )
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def write_scorecard(cards: list[dict[str, Any]], out: Path) -> Path:
    """``scorecard.md`` (a section per measure) and ``scorecard-tau.png``; returns the markdown path."""
    _figure(cards, out / "scorecard-tau.png")
    lines = [
        "# Scorecard",
        "",
        f"{len(cards)} measure(s), {cards[0]['mode']} mode, seed {cards[0]['seed']}. A larger value means sharper.",
        "",
        "![τ per population](scorecard-tau.png)",
        "",
    ]
    for card in cards:
        lines += _markdown(card)
    path = out / "scorecard.md"
    atomic_write_text(path, "\n".join(lines))
    return path
