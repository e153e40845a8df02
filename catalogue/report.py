"""REPORT.md from stored records: summary table, one section per family, figures, provenance.

The report reads records only; every figure is drawn from the numbers a claim stored.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from tabulate import tabulate

from catalogue.atomic import atomic_write_text
from catalogue.claim import FAMILIES, Figure
from catalogue.record import Record
from catalogue.store import record_name

__all__ = ["write_report", "render_report", "format_value", "short_source", "FAMILY_TITLES"]

FAMILY_TITLES = {
    "dinh2017": "Dinh, Pascanu, Bengio, Bengio 2017: sharp minima can generalize",
    "lyu2022": "Lyu, Li, Arora 2022: normalization + weight decay reduce sharpness",
    "wen2023": "Wen, Li, Ma 2023: sharpness minimization does not only minimize sharpness",
    "vardhan2026": "Vardhan, Taheri, Mazumdar 2026: flattest interpolators of multi-index models",
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


def short_source(item) -> str:
    """ "Dinh 2017, Theorem 3" from a claim's or a record's source."""
    paper = item.source.paper
    first = paper.split(",")[0].split()[0]
    year = next((tok.strip("()") for tok in paper.split() if tok.strip("()").isdigit()), "")
    return f"{first} {year}, {item.source.locator}"


def _draw(figure: Figure, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.8), dpi=110)
    for s in figure.series:
        s = s.model_copy(
            update={"x": [np.nan if v is None else v for v in s.x], "y": [np.nan if v is None else v for v in s.y]}
        )
        if s.style == "hline":
            ax.axhline(s.y[0], linestyle="--", color="gray", label=s.label)
        elif s.style == "scatter":
            ax.scatter(s.x, s.y, s=12, label=s.label)
        else:
            marker = "o" if s.style == "markers" else None
            ax.plot(s.x, s.y, marker=marker, markersize=3, label=s.label)
    from matplotlib.ticker import NullFormatter

    if figure.logx:
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())  # minor labels of short decades overlap
    if figure.logy:
        ax.set_yscale("log")
        ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set(title=figure.title, xlabel=figure.xlabel, ylabel=figure.ylabel)
    ax.grid(True, alpha=0.3)
    if len(figure.series) > 1:
        ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp)
    plt.close(fig)
    os.replace(tmp, path)


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
) -> list[str]:
    lines = [f"### `{record.claim_id}` — {VERDICT_MARK[record.verdict]}", ""]
    lines += [f"**{record.title}**", "", f"> {record.statement}", ""]
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
    return lines


CHECK_HEADERS = ["verdict rule", "measured", "→", "why this threshold"]


def check_rows(record: Record) -> list[list[str]]:
    """The declared rule as applied: each threshold beside its measured number, outcome and reason."""
    rows = []
    for check in record.checks:
        outcome = check.verdict if check.role == "test" else ("met" if check.verdict == "holds" else "**not met**")
        prefix = "requires " if check.role == "requires" else ""
        rows.append([f"{prefix}{check.rule}", format_value(check.value), outcome, check.why])
    return rows


def _paper_cell(record: Record | None) -> str:
    if record is None:
        return "—"
    return f"{VERDICT_MARK[record.verdict]} ({'agrees' if record.agrees else '**no**'})"


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
    if record.checks:
        lines += [tabulate(check_rows(record), headers=CHECK_HEADERS, tablefmt="github"), ""]
    if record.evidence:
        rows = [[f"`{k}`", _data_link(v, report_dir) or format_value(v)] for k, v in flat_items(record.evidence)]
        lines += [tabulate(rows, headers=["evidence", "value"], tablefmt="github"), ""]
    if record.thresholds:
        rows = [[f"`{k}`", format_value(v)] for k, v in record.thresholds.items()]
        lines += [tabulate(rows, headers=["threshold", "value"], tablefmt="github"), ""]
    for table in record.tables:
        lines += [f"*{table.name}*", ""]
        lines += [
            tabulate(
                [[format_value(c) for c in row] for row in table.rows],
                headers=table.headers,
                tablefmt="github",
            ),
            "",
        ]
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
) -> str:
    """The Markdown text of the report; figures are written under ``<out dir>/report/figures``.

    ``stale`` maps record names (:func:`catalogue.store.record_name`) whose record predates a change of the claim's
    code to the reason; ``paper`` holds the records at the source's budget, by claim id.
    """
    stale, paper = stale or {}, paper or {}
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
    lines = [
        "# Flatness catalogue report",
        "",
        f"Generated by `catalogue report` from {len(ordered)} record(s) ({mode_text} mode). "
        + ", ".join(f"{n} {v}" for v, n in verdicts.items())
        + f"; {sum(r.agrees for r in ordered)}/{len(ordered)} agree with their source.",
        "",
        "## Summary",
        "",
    ]
    rows = [
        [
            f"`{r.claim_id}`",
            short_source(r),
            r.statement,
            r.source_verdict,
            f"{VERDICT_MARK[r.verdict]} ({r.mode})",
            "yes" if r.agrees else "**no**",
            *([_paper_cell(paper.get(r.claim_id))] if paper else []),
            _key_evidence(r),
        ]
        for r in ordered
    ]
    headers = ["claim", "source", "statement", "source says", "verdict", "agrees"]
    headers += ["at the paper's budget"] if paper else []
    lines += [tabulate(rows, headers=[*headers, "key evidence"], tablefmt="github"), ""]
    for family in [f for f in FAMILIES if any(r.family == f for r in ordered)] + sorted(
        {r.family for r in ordered} - set(FAMILIES)
    ):
        lines += [f"## {FAMILY_TITLES.get(family, family)}", ""]
        for r in ordered:
            if r.family == family:
                lines += _claim_section(r, figure_dir, report_dir, stale, paper.get(r.claim_id))
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


def write_report(
    records: dict[str, Record],
    out: Path,
    stale: dict[str, str] | None = None,
    paper: dict[str, Record] | None = None,
) -> Path:
    """Render and atomically write the report to ``out``."""
    atomic_write_text(out, render_report(records, out, stale, paper))
    return out
