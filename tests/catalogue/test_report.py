from catalogue import registry, runner, store
from catalogue.claim import Figure, Series
from catalogue.report import flat_items, write_report


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
