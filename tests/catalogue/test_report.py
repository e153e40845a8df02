import pytest

from catalogue import registry, runner, store
from catalogue.claim import Figure, Series
from catalogue.report import flat_items, render_report, write_report


def test_report_from_results_dir(tmp_path):
    jobs = runner.plan_jobs(registry.all_claims("lyu2022")[:2], "quick", 0)
    records = runner.run_jobs(jobs, tmp_path / "results")
    # add a figure to one record, as a claim would
    fig = Figure(
        name="curve",
        title="t",
        xlabel="x",
        ylabel="y",
        logy=True,
        series=[
            Series(label="a", x=[1, 2, 3], y=[1, 10, 100]),
            Series(label="ref", y=[5], style="hline"),
        ],
    )
    table = tmp_path / "results" / "benchmark" / "pop-abc.csv"
    table.parent.mkdir(parents=True)
    table.write_text("spec_hash,gap\nx,0.1\n")
    evidence = {**records[0].evidence, "populations": {"pop": {"table": str(table)}}}
    store.write_record(tmp_path / "results", records[0].model_copy(update={"figures": [fig], "evidence": evidence}))
    out = write_report(store.load_records(tmp_path / "results"), tmp_path / "REPORT.md")
    text = out.read_text()
    assert "## Summary" in text and "## Provenance" in text
    for r in records:
        assert f"`{r.claim_id}`" in text
    png = tmp_path / "report" / "figures" / f"{records[0].claim_id}-curve.png"
    assert png.exists() and png.stat().st_size > 1000
    assert f"](report/figures/{png.name})" in text
    # a per-model table named in the evidence travels with the report
    assert "[pop-abc.csv](report/data/pop-abc.csv)" in text
    assert (tmp_path / "report" / "data" / "pop-abc.csv").read_text() == table.read_text()


def test_nested_evidence_is_flattened_with_dotted_keys():
    evidence = {"sam": {"trace": 2.0, "per_run": [1, 2]}, "flatter": True}
    assert flat_items(evidence) == [("sam.trace", 2.0), ("sam.per_run", [1, 2]), ("flatter", True)]


def test_report_opens_with_findings_contents_and_a_compact_summary(tmp_path):
    claims = [registry.get("wen2023.eq5-radius-erratum"), registry.get("wen2023.bias-min-trace-bound")]
    runner.run_jobs(runner.plan_jobs(claims, "quick", 0, controls=True), tmp_path / "r")
    scanned = store.scan(tmp_path / "r")
    text = render_report(scanned.records, tmp_path / "REPORT.md", controls=scanned.control_records)
    head = text[: text.index("## Summary")]
    assert head.index("## Findings") < head.index("## Contents")
    # the one disagreement, linked to its section, with its measured reason
    finding = next(line for line in head.splitlines() if line.startswith("- [eq5-radius-erratum]"))
    assert "(#eq5-radius-erratum)" in finding and "we measure **refuted**" in finding and "typo in Eq. 5" in finding
    assert '<a id="eq5-radius-erratum"></a>' in text and "- [Summary](#summary)" in head
    summary = text[text.index("## Summary") :].split("\n\n")[1].splitlines()
    assert all(len(row) <= 160 for row in summary), max(summary, key=len)
    assert any("| max_rel_err = " in row for row in summary)  # the rule's first quantity is the headline
    assert "[eq5-radius-erratum]: #eq5-radius-erratum" in text


def test_long_tables_fold_and_figures_keep_their_log_labels(tmp_path):
    from catalogue.report import _table

    short, long = [[i, i] for i in range(3)], [[i, i] for i in range(30)]
    assert "<details>" not in "\n".join(_table("t", short, ["a", "b"]))
    folded = "\n".join(_table("t", long, ["a", "b"]))
    assert folded.startswith("<details><summary>t (30 rows)</summary>") and folded.rstrip().endswith("</details>")


def test_long_claim_tables_go_to_linked_csvs(tmp_path):
    from catalogue.report import _data_table

    data = tmp_path / "report" / "data" / "claim-t.csv"
    short = _data_table("t", [[1, 2]], ["a", "b"], data, tmp_path)
    assert not data.exists() and "|   a |" in "\n".join(short)
    long = _data_table("t", [[i, f"x{i}"] for i in range(30)], ["a", "b"], data, tmp_path)
    assert long[0] == "*t*: 30 rows in [claim-t.csv](report/data/claim-t.csv)"
    lines = data.read_text().splitlines()
    assert lines[0] == "a,b" and lines[-1] == "29,x29" and len(lines) == 31


def test_the_readme_table_is_replaced_between_its_markers():
    from catalogue.report import README_TABLE, replace_readme_table

    start, end = README_TABLE
    text = f"intro\n{start}\n| old |\n{end}\nrest\n"
    assert replace_readme_table(text, "| new |") == f"intro\n{start}\n| new |\n{end}\nrest\n"
    with pytest.raises(ValueError, match="markers"):
        replace_readme_table("no table here", "| new |")


def test_leaderboard_heat_map_reads_tau_from_the_evidence_not_the_cells(tmp_path):
    from catalogue.claim import Table
    from catalogue.report import LEADERBOARD, _leaderboard

    (record,) = runner.run_jobs(runner.plan_jobs([registry.get("wen2023.eq5-radius-erratum")], "quick", 0), tmp_path)
    table = Table(name=LEADERBOARD[1], headers=["measure", "digits", "xor"], rows=[["lambda_max", "shown", "cells"]])
    tau = {"lambda_max": {"digits": [-0.031, -0.16, 0.11], "xor": [0.27, "NaN", 0.43]}, "trace": {}}
    record = record.model_copy(
        update={"claim_id": LEADERBOARD[0], "tables": [table], "evidence": {"leaderboard": {"tau": tau}}}
    )
    shown, taus = _leaderboard({LEADERBOARD[0]: record})
    assert shown == table
    # unrounded; a NaN CI (stored as a string) and empty rows are left out
    assert taus == {"lambda_max": {"digits": (-0.031, -0.16, 0.11)}}


def test_series_intervals_are_drawn_as_bands_and_whiskers(tmp_path, monkeypatch):
    from catalogue import report

    calls = []
    import matplotlib.axes

    for name in ("fill_between", "errorbar"):
        original = getattr(matplotlib.axes.Axes, name)
        monkeypatch.setattr(
            matplotlib.axes.Axes,
            name,
            lambda self, *a, _o=original, _n=name, **k: calls.append(_n) or _o(self, *a, **k),
        )
    fig = Figure(
        name="f",
        title="t",
        xlabel="x",
        ylabel="y",
        series=[
            Series.mean_band("runs", [1, 2, 3], [[1.0, 2.0, 3.0], [1.5, 2.5, 2.0]]),
            Series.mean_band("draws", [1, 2, 3], [[1.0, 2.0, 3.0], [2.0, 4.0, 6.0]], log=True, style="markers"),
        ],
    )
    report._draw(fig, tmp_path / "f.png")
    assert calls == ["fill_between", "errorbar"] and (tmp_path / "f.png").stat().st_size > 1000


def test_mean_band_is_two_standard_errors_and_geometric_on_log():
    s = Series.mean_band("runs", [1, 2], [[1.0, 4.0], [3.0, 4.0]])
    assert s.y == [2.0, 4.0] and s.lower == pytest.approx([0.0, 4.0]) and s.upper == pytest.approx([4.0, 4.0])
    g = Series.mean_band("draws", [1], [[1.0], [100.0]], log=True)
    assert g.y == pytest.approx([10.0]) and g.lower[0] < 10.0 < g.upper[0]
    assert g.lower[0] * g.upper[0] == pytest.approx(100.0)  # symmetric on the log scale
    assert Series.mean_band("one run", [1], [[2.0]]).lower == []
    with pytest.raises(ValueError, match="one entry per point"):
        Series(label="bad", x=[1, 2], y=[1, 2], lower=[0], upper=[3])
