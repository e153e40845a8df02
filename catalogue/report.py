"""REPORT.md from stored records: summary table, one section per family, figures, provenance.

The report reads records only; every figure is drawn from the numbers a claim stored.
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from tabulate import tabulate

from catalogue import registry
from catalogue.atomic import atomic_write_text
from catalogue.claim import KINDS, Control, Figure
from catalogue.families import FAMILIES
from catalogue.record import Record
from catalogue.store import record_name

__all__ = [
    "write_report",
    "render_report",
    "format_value",
    "control_rows",
    "control_summary",
    "kind_counts",
    "headline",
    "anchor",
    "seed_rows",
    "FAMILY_TITLES",
]

FAMILY_TITLES = {
    "dinh2017": "Dinh, Pascanu, Bengio, Bengio 2017: sharp minima can generalize",
    "lyu2022": "Lyu, Li, Arora 2022: normalization + weight decay reduce sharpness",
    "wen2023": "Wen, Li, Ma 2023: sharpness minimization does not only minimize sharpness",
    "vardhan2026": "Vardhan, Taheri, Mazumdar 2026: flattest interpolators of multi-index models",
    "label_noise": "Label-noise SGD minimizes the Hessian trace (HaoChen et al. 2021; Li, Wang, Arora 2022)",
    "keskar2017": "Keskar et al. 2017: large-batch training finds sharp minima (and Dinh's rescaling)",
    "kaur2023": "Kaur, Cohen, Lipton 2023: λ1 and generalization decouple",
    "gatmiry2023": "Gatmiry et al. 2023: the flattest deep matrix factorization is (nearly) the nuclear-norm one",
    "andriushchenko2023": "Andriushchenko et al. 2023: a modern look at sharpness and generalization",
    "invariance": "Invariance audit: which measures survive the network's symmetries",
    "benchmark": "Measure benchmark: does sharpness predict generalization across populations",
}
VERDICT_MARK = {
    "holds": "✓ holds",
    "refuted": "✗ refuted",
    "inconclusive": "? inconclusive",
    "error": "! error",
}
KEY_EVIDENCE = 3
KIND_PLURAL = {"identity": "identities", "construction": "constructions", "empirical": "empirical"}
Controls = dict[tuple[str, str], Record]


def format_value(value: Any, digits: int = 4, max_items: int = 6) -> str:
    """A number or list of numbers, short: ``digits`` significant digits, lists cut after ``max_items``."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    if isinstance(value, list):
        shown = ", ".join(format_value(v, digits, max_items) for v in value[:max_items])
        more = f", … ({len(value)} values)" if len(value) > max_items else ""
        return f"[{shown}{more}]"
    return str(value)


def flat_items(evidence: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """(dotted key, value) pairs with nested dicts flattened: ``{"sam": {"trace": 2}}`` → ``sam.trace``."""
    items = []
    for k, v in evidence.items():
        items += flat_items(v, f"{prefix}{k}.") if isinstance(v, dict) else [(f"{prefix}{k}", v)]
    return items


def _key_evidence(record: Record) -> str:
    if record.error:
        return f"error: {record.error}"
    items = [(k, v) for k, v in flat_items(record.evidence) if not isinstance(v, list)][:KEY_EVIDENCE]
    return "; ".join(f"{k} = {format_value(v)}" for k, v in items)


def _save_figure(fig, path: Path) -> None:
    """Lay out, write atomically (a torn PNG never replaces a good one), close."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp)
    plt.close(fig)
    os.replace(tmp, path)


def _draw(figure: Figure, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    many = len(figure.series) > 3
    fig, ax = plt.subplots(figsize=(7.5 if many else 5.5, 3.8), dpi=110)
    for s in figure.series:
        x, y, lower, upper = ([np.nan if v is None else v for v in values] for values in (s.x, s.y, s.lower, s.upper))
        if s.style == "hline":
            ax.axhline(y[0], linestyle="--", color="gray", label=s.label)
            continue
        if s.style == "scatter":
            drawn = ax.scatter(x, y, s=12, label=s.label)
            color = drawn.get_facecolor()[0]
        else:
            (drawn,) = ax.plot(x, y, marker="o" if s.style == "markers" else None, markersize=3, label=s.label)
            color = drawn.get_color()
        if lower and s.style == "line":
            ax.fill_between(x, lower, upper, color=color, alpha=0.2, linewidth=0)
        elif lower:
            below, above = np.subtract(y, lower), np.subtract(upper, y)
            ax.errorbar(x, y, yerr=[below, above], fmt="none", ecolor=color, elinewidth=0.8, capsize=2)
    from matplotlib.ticker import NullFormatter

    # a log axis spanning less than ~1.5 decades keeps its minor labels (else it may show one tick label);
    # over more decades they overlap
    if figure.logx:
        ax.set_xscale("log")
    if figure.logy:
        ax.set_yscale("log")
    for log, axis, (low, high) in ((figure.logx, ax.xaxis, ax.get_xlim()), (figure.logy, ax.yaxis, ax.get_ylim())):
        if log and low > 0 and np.log10(high / low) > 1.5:
            axis.set_minor_formatter(NullFormatter())
    ax.set(title=figure.title, xlabel=figure.xlabel, ylabel=figure.ylabel)
    ax.grid(True, alpha=0.3)
    if many:  # beside the axes, never over the data
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    elif len(figure.series) > 1:
        ax.legend(fontsize=7)
    _save_figure(fig, path)


def _data_link(value: Any, report_dir: Path) -> str | None:
    """A CSV named in the evidence (a per-model table) is copied next to the report and linked."""
    if not (isinstance(value, str) and value.endswith(".csv") and Path(value).is_file()):
        return None
    target = report_dir / "report" / "data" / Path(value).name
    atomic_write_text(target, Path(value).read_text(encoding="utf-8"))
    rel = os.path.relpath(target, report_dir)
    return f"[{Path(value).name}]({rel})"


def _claim_section(
    record: Record,
    figure_dir: Path,
    report_dir: Path,
    stale: dict[str, str],
    paper: Record | None = None,
    controls: Controls | None = None,
) -> list[str]:
    lines = [
        f'<a id="{anchor(record.claim_id)}"></a>',
        "",
        f"### `{record.claim_id}` — {VERDICT_MARK[record.verdict]}",
        "",
    ]
    lines += [f"**{record.title}** ({record.kind or 'kind not recorded'})", "", f"> {record.statement}", ""]
    lines.append(
        f"Source: {record.source.cite()}"
        + (f" (seed `{record.source.seed}`)" if record.source.seed else "")
        + f". The source says **{record.source_verdict}**; we measured **{record.verdict}** ({record.mode} mode), "
        + f"which {'agrees with' if record.agrees else 'does not agree with'} it."
    )
    lines.append("")
    lines += _record_body(record, figure_dir, report_dir, stale.get(record_name(record.claim_id, record.mode)))
    if paper is not None:
        agree = "agrees with" if paper.agrees else "does not agree with"
        lines += [
            f"#### At the paper's budget — {VERDICT_MARK[paper.verdict]}",
            "",
            f"The same check at the source's own budget (`catalogue run {paper.claim_id} --budget paper`): we "
            f"measured **{paper.verdict}**, which {agree} the source.",
            "",
        ]
        name = record_name(paper.claim_id, paper.mode)
        lines += _record_body(paper, figure_dir, report_dir, stale.get(name), suffix="@paper")
    return lines + _controls_section(record, controls or {})


CONTROL_HEADERS = ["control", "what it breaks", "should be", "measured", "differs from the claim"]


def _control_runs(record: Record, controls: Controls) -> list[tuple[Control, Record | None]]:
    """Each declared control of ``record``'s claim with its record of the same mode and seed (None: not run)."""
    runs = []
    for control in registry.get(record.claim_id).controls:
        found = controls.get((record.claim_id, control.name))
        same_run = found is not None and (found.mode, found.seed) == (record.mode, record.seed)
        runs.append((control, found if same_run else None))
    return runs


def control_rows(record: Record, controls: Controls) -> list[list[str]]:
    """One row per declared negative control of ``record``'s claim: its verdict beside the claim's."""
    rows = []
    for control, found in _control_runs(record, controls):
        if found is None:
            measured, differs = "not run", "—"
        else:
            measured = VERDICT_MARK[found.verdict] + ("" if found.agrees else " (**not as expected**)")
            differs = "yes" if found.verdict != record.verdict else "**no**"
        rows.append([f"`{control.name}`", control.breaks, control.expect, measured, differs])
    return rows


def _controls_section(record: Record, controls: Controls) -> list[str]:
    rows = control_rows(record, controls)
    if not rows:
        return ["*No negative control declared yet: nothing here shows this check can come out the other way.*", ""]
    intro = (
        "*Negative controls*: the same check and verdict rule on the claim's spec with its premise broken "
        f"(`catalogue run {record.claim_id} --controls`)."
    )
    return [intro, "", tabulate(rows, headers=CONTROL_HEADERS, tablefmt="github"), ""]


def control_summary(record: Record, controls: Controls) -> str:
    """``2/2 turn`` (controls whose verdict differs from the claim's, of those declared), ``not run``, or ``none``."""
    runs = _control_runs(record, controls)
    if not runs:
        return "none"
    if all(found is None for _, found in runs):
        return "not run"
    return f"{_turned(record, runs)}/{len(runs)} turn"


def _turned(record: Record, runs: list[tuple[Control, Record | None]]) -> int:
    return sum(found is not None and found.verdict != record.verdict for _, found in runs)


def kind_counts(records: list[Record]) -> str:
    """Agreement per claim kind: ``identities 9/9, constructions 12/13, empirical 14/20``."""
    parts = []
    for kind in KINDS:
        of_kind = [r for r in records if r.kind == kind]
        if of_kind:
            parts.append(f"{KIND_PLURAL[kind]} {sum(r.agrees for r in of_kind)}/{len(of_kind)}")
    return ", ".join(parts)


CHECK_HEADERS = ["verdict rule", "measured", "→", "why this threshold"]
EVIDENCE = ["evidence", "value"]


def check_rows(record: Record) -> list[list[str]]:
    """The declared rule as applied: each threshold beside its measured number, outcome and reason."""
    rows = []
    for check in record.checks:
        outcome = check.verdict if check.role == "test" else ("met" if check.verdict == "holds" else "**not met**")
        prefix = {"test": "", "requires": "requires ", "witness": "counterexample: "}[check.role]
        rows.append([f"{prefix}{check.rule}", format_value(check.value), outcome, check.why])
    return rows


def _checks(record: Record, data: Path, report_dir: Path) -> list[str]:
    """The rule as applied; a long one (a rule over each population, each cell) opens with its counts,
    the checks that did not hold and each distinct reason once, the whole list in the CSV ``data``."""
    rows = check_rows(record)
    if len(rows) <= LONG_TABLE:
        return _table("verdict rule, applied", rows, CHECK_HEADERS)
    counts = Counter(c.verdict for c in record.checks)
    summary = ", ".join(f"{counts[v]} {v}" for v in ("holds", "inconclusive", "refuted") if counts[v])
    lines = [f"*{len(rows)} checks of the verdict rule: {summary}.*", ""]
    misses = [row[:3] for row, check in zip(rows, record.checks, strict=True) if check.verdict != "holds"]
    if misses:
        lines += _data_table(
            "checks that did not hold", misses, CHECK_HEADERS[:3], data.with_name(data.stem + "-misses.csv"), report_dir
        )
    reasons = list(dict.fromkeys(check.why for check in record.checks if check.why))
    lines += ["*why these thresholds*:", "", *(f"- {why}" for why in reasons), ""]
    return lines + _data_table("verdict rule, applied", rows, CHECK_HEADERS, data, report_dir)


def seed_rows(record: Record) -> tuple[list[str], list[list[Any]]]:
    """(headers, rows): each seed's verdict and the numbers its rule read."""
    quantities = list(dict.fromkeys(k for run in record.seeds for k in run.values))
    rows = [
        [run.seed, run.verdict, *(format_value(run.values.get(q, "—")) for q in quantities)] for run in record.seeds
    ]
    return ["seed", "verdict", *quantities], rows


def _seeds_table(record: Record, data: Path, report_dir: Path) -> list[str]:
    """Each seed's verdict and numbers (the tables above are the first seed's); with more than a few
    numbers, one row per number and a column per seed (a long one in the CSV ``data``)."""
    headers, rows = seed_rows(record)
    if len(headers) > 8:
        columns = list(zip(*rows, strict=True))
        headers, rows = (
            ["", *(f"seed {seed}" for seed in columns[0])],
            [[name, *values] for name, values in zip(headers[1:], columns[1:], strict=True)],
        )
    intro = (
        f"*Across {len(record.seeds)} seeds* the verdict is **{record.verdict}**: holds (refuted) when at least 80% "
        "of the seeds hold (refute) and none says the opposite, otherwise inconclusive (seed-dependent). The "
        "evidence, checks and figures shown are seed "
        f"{record.seeds[0].seed}'s. Per seed: " + ", ".join(f"{run.seed} {run.verdict}" for run in record.seeds) + "."
    )
    return [intro, "", *_data_table("per seed", rows, headers, data, report_dir, named=False)]


def _seed_text(record: Record) -> str:
    return f", {len(record.seeds)} seeds" if record.seeds else ""


LONG_TABLE = 12
# The measure leaderboard is a table, not a claim: the record that carries it, and the table's name.
LEADERBOARD = ("benchmark.sharpness-predicts-gap", "leaderboard")


def _table(name: str, rows: list[list[Any]], headers: list[str], named: bool = False) -> list[str]:
    """A GitHub table; one longer than LONG_TABLE rows folds into a <details> block."""
    text = tabulate(rows, headers=headers, tablefmt="github")
    if len(rows) <= LONG_TABLE:
        return ([f"*{name}*", ""] if named else []) + [text, ""]
    return [f"<details><summary>{name} ({len(rows)} rows)</summary>", "", text, "", "</details>", ""]


def anchor(claim_id: str) -> str:
    """The link target of a claim's section.

    A built-in claim's is its slug (unique across the built-in families, checked by the registry
    test, and kept so links into REPORT.md stay put); a plugin's is its whole id with the dot as a
    dash, since its slug may repeat a built-in one.
    """
    family, slug = claim_id.split(".", 1)
    return slug if family in FAMILIES else f"{family}-{slug}"


def _link(claim_id: str) -> str:
    return f"[{anchor(claim_id)}](#{anchor(claim_id)})"


def headline(record: Record) -> str:
    """The number a reader looks at first: the declared rule's first quantity, else the first scalar evidence."""
    if record.error:
        return "error"
    if record.checks:  # the first tested quantity, not a precondition ("no run diverged")
        check = next((c for c in record.checks if c.role != "requires"), record.checks[0])
        return f"{check.quantity} = {format_value(check.value)}"
    items = [(k, v) for k, v in flat_items(record.evidence) if not isinstance(v, list)]
    return f"{items[0][0]} = {format_value(items[0][1])}" if items else "—"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _data_table(
    name: str, rows: list[list[Any]], headers: list[str], data: Path, report_dir: Path, named: bool = True
) -> list[str]:
    """A table in the report; one longer than LONG_TABLE rows goes to the CSV ``data`` (linked; GitHub
    shows it as a table), so the report stays short."""
    if len(rows) <= LONG_TABLE:
        return _table(name, rows, headers, named=named)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(headers)
    writer.writerows(rows)
    atomic_write_text(data, buf.getvalue())
    return [f"*{name}*: {len(rows)} rows in [{data.name}]({os.path.relpath(data, report_dir)})", ""]


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60]


def _record_body(record: Record, figure_dir: Path, report_dir: Path, stale: str | None, suffix: str = "") -> list[str]:
    lines = []
    if stale:
        lines += [f"**Stale record:** {stale}; `catalogue run {record.claim_id}` recomputes it.", ""]
    if record.expected_failure:
        lines += [f"*Known not to reproduce here:* {record.expected_failure}", ""]
    if record.error:
        lines += [f"**Error:** `{record.error}`", ""]
    if record.notes:
        lines += [record.notes, ""]
    data = report_dir / "report" / "data"
    stem = f"{anchor(record.claim_id)}{suffix.replace('@', '-')}"
    if record.checks:
        lines += _checks(record, data / f"{stem}-checks.csv", report_dir)
    if record.seeds:
        lines += _seeds_table(record, data / f"{stem}-seeds.csv", report_dir)
    if record.evidence:
        items = flat_items(record.evidence)
        links = {k: link for k, v in items if (link := _data_link(v, report_dir))}
        if len(items) <= LONG_TABLE:
            lines += _table("evidence", [[f"`{k}`", links.get(k) or format_value(v)] for k, v in items], EVIDENCE)
        else:  # the numbers to a CSV, the links to data files stay in the report
            rows = [[k, format_value(v)] for k, v in items if k not in links]
            lines += _data_table("evidence", rows, ["evidence", "value"], data / f"{stem}-evidence.csv", report_dir)
            lines += _table("data", [[f"`{k}`", link] for k, link in links.items()], EVIDENCE) if links else []
    if record.thresholds:
        rows = [[f"`{k}`", format_value(v)] for k, v in record.thresholds.items()]
        # the record's ``thresholds`` carries the check's settings (fit ranges, solver tolerances); the rule decides
        lines += _table("settings", rows, ["setting of the check", "value"])
    for table in record.tables:
        rows = [[format_value(c) for c in row] for row in table.rows]
        lines += _data_table(table.name, rows, table.headers, data / f"{stem}-{_slug(table.name)}.csv", report_dir)
    for figure in record.figures:
        path = figure_dir / f"{record.claim_id}{suffix}-{figure.name}.png"
        _draw(figure, path)
        rel = os.path.relpath(path, report_dir)
        lines += [f"![{figure.title}]({rel})", ""]
    lines.append(
        f"<sub>mode {record.mode} · seed {record.seed} · spec `{record.spec_hash[:12]}` · "
        f"code `{record.code_hash[:12]}` · {record.seconds:.1f} s</sub>"
    )
    lines.append("")
    return lines


def render_report(
    records: dict[str, Record],
    out: Path,
    stale: dict[str, str] | None = None,
    paper: dict[str, Record] | None = None,
    controls: Controls | None = None,
) -> str:
    """The Markdown text of the report; figures are written under ``<out dir>/report/figures``.

    ``stale`` maps record names (:func:`catalogue.store.record_name`) whose record predates a change of the claim's
    code to the reason; ``paper`` holds the records at the source's budget, by claim id; ``controls`` the
    negative controls' records by (claim id, control name).
    """
    stale, paper, controls = stale or {}, paper or {}, controls or {}
    records = {**{k: v for k, v in paper.items() if k not in records}, **records}  # a paper-only claim leads
    paper = {k: v for k, v in paper.items() if records[k] is not v}
    report_dir = out.parent
    figure_dir = report_dir / "report" / "figures"
    ordered = sorted(
        records.values(),
        key=lambda r: (FAMILIES.index(r.family) if r.family in FAMILIES else 99, r.claim_id),
    )
    modes = Counter(r.mode for r in [*ordered, *paper.values()])
    verdicts = Counter(r.verdict for r in ordered)
    mode_text = ", ".join(f"{n} {m}" for m, n in modes.items())
    leaderboard = _leaderboard(records)
    families = [f for f in FAMILIES if any(r.family == f for r in ordered)] + sorted(
        {r.family for r in ordered} - set(FAMILIES)
    )
    lines = [
        "# Flatness catalogue report",
        "",
        f"Generated by `catalogue report` from {len(ordered)} record(s) ({mode_text} mode). "
        + ", ".join(f"{n} {v}" for v, n in verdicts.items())
        + f". **{sum(r.agrees for r in ordered)}/{len(ordered)} agree with their source** "
        + f"({kind_counts(ordered)}).",
        "",
        _controls_header(ordered, controls),
        "",
        "## Findings",
        "",
        *_findings(ordered, paper, controls),
        "",
        "## Contents",
        "",
        "- [Summary](#summary)",
        *(f"- [{FAMILY_TITLES.get(f, f)}](#{_family_anchor(f)})" for f in families),
        *(["- [Measure leaderboard](#measure-leaderboard)"] if leaderboard else []),
        "- [Provenance](#provenance)",
        "",
        "## Summary",
        "",
    ]
    rows = [
        [
            f"[{anchor(r.claim_id)}][]",  # a reference link: the row stays short
            r.kind or "—",
            r.source_verdict,
            r.verdict,
            len(r.seeds) or 1,
            "yes" if r.agrees else "**no**",
            paper[r.claim_id].verdict if r.claim_id in paper else "",
            _cut(headline(r), 40),
        ]
        for r in ordered
    ]
    headers = ["claim", "kind", "source", "ours", "seeds", "agrees", "paper", "headline"]
    lines += [tabulate(rows, headers=headers, tablefmt="github"), ""]
    lines += [f"[{anchor(r.claim_id)}]: #{anchor(r.claim_id)}" for r in ordered]
    lines += [
        "",
        "*ours*: the full-mode verdict (pooled over *seeds* where there are several); *paper*: the verdict at "
        "the source's own budget where it differs from full mode; controls and every number are in each claim's "
        "section (`catalogue show ID` prints one claim).",
        "",
    ]
    for family in families:
        lines += [f'<a id="{_family_anchor(family)}"></a>', "", f"## {FAMILY_TITLES.get(family, family)}", ""]
        for r in ordered:
            if r.family == family:
                lines += _claim_section(r, figure_dir, report_dir, stale, paper.get(r.claim_id), controls)
    lines += _leaderboard_section(leaderboard, figure_dir, report_dir)
    lines += ["## Provenance", ""]
    versions = sorted({tuple(sorted(r.versions.items())) for r in ordered})
    for v in versions:
        lines.append("- versions: " + ", ".join(f"{k} {val}" for k, val in v))
    seeds = sorted({r.seed for r in ordered})
    created = sorted(r.created_at for r in ordered)
    lines += [
        f"- seeds: {', '.join(map(str, seeds))}; modes: {mode_text}",
        f"- records created {created[0]} … {created[-1]}",
        "- every record holds its full spec and spec hash, the sha256 of each source file its claim imports "
        "and of each evidence number; `catalogue show ID` prints them, and "
        "`catalogue run ID --seed S` with the same mode reproduces the numbers.",
        "- to verify the records behind this report: `catalogue verify report/records` (is each record valid, "
        "unedited and computed by the present code?) and `catalogue verify report/records --rerun-sample 3` "
        "(rerun three claims at random and compare every number).",
        f"- stale records (code changed since they were computed): {len(stale)}"
        + (f" ({', '.join(sorted(stale))})" if stale else ""),
        "",
    ]
    return "\n".join(lines)


def _finite(value) -> bool:
    """A finite number (records store NaN and ±inf as strings)."""
    return isinstance(value, int | float) and math.isfinite(value)


def _leaderboard(records: dict[str, Record]):
    """The leaderboard table of the record that carries it and its τ with CIs by measure and
    population (``{measure: {population: (τ, low, high)}}``, from the evidence), or None."""
    claim_id, name = LEADERBOARD
    record = records.get(claim_id)
    table = None if record is None else next((t for t in record.tables if t.name == name), None)
    if table is None:
        return None
    taus = {
        measure: {population: tuple(v) for population, v in cells.items() if all(map(_finite, v))}
        for measure, cells in record.evidence.get("leaderboard", {}).get("tau", {}).items()
    }
    return table, {m: cells for m, cells in taus.items() if cells}


def _draw_leaderboard(taus: dict[str, dict[str, tuple[float, float, float]]], populations: list[str], path: Path):
    """A heat map of τ (measures × populations); in each cell a whisker spans the 95% CI on the
    cell's own τ scale (left edge −1, right edge +1) with a dot at τ."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    measures = list(taus)
    grid = np.array([[taus[m].get(p, (np.nan,) * 3)[0] for p in populations] for m in measures])
    fig, ax = plt.subplots(figsize=(2.2 + 1.6 * len(populations), 0.9 + 0.32 * len(measures)), dpi=110)
    image = ax.imshow(grid, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto")
    for i, m in enumerate(measures):
        for j, p in enumerate(populations):
            if p not in taus[m]:
                ax.text(j, i, "n/a", ha="center", va="center", fontsize=6, color="0.4")
                continue
            tau, low, high = taus[m][p]
            ax.plot([j + 0.42 * low, j + 0.42 * high], [i + 0.22, i + 0.22], color="k", lw=1)
            ax.plot([j + 0.42 * tau], [i + 0.22], "o", color="k", ms=2.5)
            ax.text(j, i - 0.12, f"{tau:+.2f}", ha="center", va="center", fontsize=6.5)
    ax.set_xticks(range(len(populations)), populations)
    ax.set_yticks(range(len(measures)), measures, fontsize=7)
    ax.set_title("Kendall τ with the gap; whisker: 95% CI on the cell's [−1, 1] scale", fontsize=8)
    fig.colorbar(image, ax=ax, fraction=0.05, pad=0.02, label="τ")
    _save_figure(fig, path)


def _leaderboard_section(leaderboard, figure_dir: Path, report_dir: Path) -> list[str]:
    """Every measure on every population, unfolded: the table the benchmark claims are drawn from,
    with its heat map."""
    if leaderboard is None:
        return []
    table, taus = leaderboard
    rows = [[format_value(c) for c in row] for row in table.rows]
    figure = []
    if taus:
        path = figure_dir / "leaderboard-tau.png"
        _draw_leaderboard(taus, [str(h) for h in table.headers[1:]], path)
        figure = [f"![Kendall τ of every measure on every population]({os.path.relpath(path, report_dir)})", ""]
    return [
        "## Measure leaderboard",
        "",
        "Kendall τ with the generalization gap (95% bootstrap CI), granulated Ψ and conditional MI of every measure "
        f"on every population, on fixed data (models compared only with models trained on the same data), from "
        f"{_link(LEADERBOARD[0])} (its section has the definitions, the scatter plots and the per-model tables). A "
        "table, not a claim: it cannot be refuted.",
        "",
        *figure,
        tabulate(rows, headers=table.headers, tablefmt="github"),
        "",
    ]


def _family_anchor(family: str) -> str:
    return f"family-{family}"


def _findings(records: list[Record], paper: dict[str, Record], controls: Controls) -> list[str]:
    """One line per disagreement with a source (full or paper budget) and per control that did not
    come out as declared, each linked to its section."""
    lines = []
    for r in records:
        if not r.agrees:
            why = r.error or r.expected_failure or headline(r)
            lines.append(
                f"- {_link(r.claim_id)} ({r.kind}): the source says **{r.source_verdict}**, we measure "
                f"**{r.verdict}** ({r.mode}{_seed_text(r)}). {_cut(why, 300)}"
            )
        p = paper.get(r.claim_id)
        if p is not None and not p.agrees:
            lines.append(
                f"- {_link(r.claim_id)} at the paper's budget: the source says **{p.source_verdict}**, we measure "
                f"**{p.verdict}**. {_cut(p.expected_failure or headline(p), 300)}"
            )
    shown = {r.claim_id for r in records}
    for (claim_id, name), c in sorted(controls.items()):
        if not c.agrees and claim_id in shown:
            expect = registry.get(claim_id).control(name).expect
            lines.append(
                f"- {_link(claim_id)}, control `{name}`: should be **{expect}**, measured **{c.verdict}** "
                "(the check may not be able to fail this way)."
            )
    return lines or ["- none: every claim agrees with its source and every control came out as declared."]


def _controls_header(records: list[Record], controls: Controls) -> str:
    runs = {r.claim_id: _control_runs(r, controls) for r in records}
    declared = sum(bool(runs[r.claim_id]) for r in records)
    turned = sum(_turned(r, runs[r.claim_id]) > 0 for r in records)
    empirical = [r for r in records if r.kind == "empirical"]
    pooled = sum(len(r.seeds) >= 5 for r in empirical)
    return (
        f"Negative controls: {declared} of {len(records)} claims declare one; for {turned} of them at least one "
        "control's verdict differs from the claim's, which shows the check can come out the other way. The others "
        f"have not yet shown that they can fail. Seeds: {pooled} of the {len(empirical)} empirical claims pool ≥ 5 "
        "independent seeds into their verdict (per-seed verdicts in their sections); the others run one seed, some "
        "of them pooling their own draws inside the check (their specs say how many)."
    )


README_TABLE = ("<!-- claims-table: written by `catalogue report --readme README.md` -->", "<!-- /claims-table -->")


def readme_claims_table(records: dict[str, Record], paper: dict[str, Record], controls: Controls) -> str:
    """The README's table of every claim (full mode): kind, the source's verdict and ours, agreement,
    the paper-budget verdict, how many controls turn it, and its headline number."""
    rows = []
    for claim_id in sorted(records):
        r = records[claim_id]
        rows.append(
            [
                f"`{claim_id}`",
                r.kind,
                r.source_verdict,
                f"{r.verdict}{_seed_text(r)}",
                "yes" if r.agrees else "**no**",
                paper[claim_id].verdict if claim_id in paper else "—",
                control_summary(r, controls),
                _cut(headline(r), 60),
            ]
        )
    headers = ["claim", "kind", "source says", "verdict (full)", "agrees", "paper budget", "controls turn", "headline"]
    return tabulate(rows, headers=headers, tablefmt="github")


def replace_readme_table(text: str, table: str) -> str:
    """``text`` with the block between the README_TABLE markers replaced by ``table``.

    Raises:
        ValueError: the markers are missing.
    """
    start, end = README_TABLE
    if start not in text or end not in text:
        raise ValueError(f"the README has no claims table markers ({start} … {end})")
    head, rest = text.split(start, 1)
    return f"{head}{start}\n{table}\n{end}{rest.split(end, 1)[1]}"


def write_report(
    records: dict[str, Record],
    out: Path,
    stale: dict[str, str] | None = None,
    paper: dict[str, Record] | None = None,
    controls: Controls | None = None,
) -> Path:
    """Render and atomically write the report to ``out``."""
    atomic_write_text(out, render_report(records, out, stale, paper, controls))
    return out
