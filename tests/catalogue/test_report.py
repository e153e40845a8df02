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


def test_leaderboard_taus_read_back_the_cells_the_benchmark_writes():
    from catalogue.claim import Table
    from catalogue.report import leaderboard_taus

    table = Table(
        name="leaderboard",
        headers=["measure", "digits", "xor"],
        rows=[
            ["lambda_max", "τ -0.03 [-0.16, +0.11]; Ψ -0.02; CMI 0.001", "τ +0.27 [+0.12, +0.43]; Ψ +0.31; CMI 0.018"],
            ["symmetry_min_trace", "n/a", "τ +0.39 [+0.20, +0.55]; Ψ +0.40; CMI 0.020"],
        ],
    )
    assert leaderboard_taus(table) == {
        "lambda_max": {"digits": (-0.03, -0.16, 0.11), "xor": (0.27, 0.12, 0.43)},
        "symmetry_min_trace": {"xor": (0.39, 0.2, 0.55)},
    }
