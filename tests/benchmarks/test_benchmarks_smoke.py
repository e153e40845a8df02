"""The benchmarks run end to end at tiny sizes (their numbers are not asserted: they are timings)."""

from benchmarks import curvature, gd, sam


def test_curvature_benchmark_quick(capsys):
    curvature.main(["--quick"])
    out = capsys.readouterr().out
    assert "Targets" in out and "hard-gap" in out and "lanczos" in out


def test_gd_benchmark_quick(capsys):
    gd.main(["--quick"])
    out = capsys.readouterr().out
    assert "naive autograd loop" in out and "rel. diff" in out


def test_sam_benchmark_quick(capsys):
    sam.main(["--quick"])
    out = capsys.readouterr().out
    assert "naive autograd loop" in out and "Targets" in out and "agreement" in out


def test_populations_benchmark_quick(capsys):
    from benchmarks import populations

    populations.main(["--quick"])
    out = capsys.readouterr().out
    assert "lambda_max" in out and "projected min" in out and "multi_index" in out


def test_trace_search_benchmark_quick(capsys):
    from benchmarks import trace_search

    trace_search.main(["--quick"])
    out = capsys.readouterr().out
    assert "closed form" in out and "Sim-LN" in out and "trace rel. diff" in out


def test_sgd_benchmark_quick(capsys):
    from benchmarks import sgd

    sgd.main(["--quick"])
    out = capsys.readouterr().out
    assert "written out µs/step" in out and "same bits" in out and "False" not in out


def test_scale_benchmark_quick(capsys):
    """Runs with or without its optional baselines (PyHessian, curvlinops: `pip install -e '.[scale]'`)."""
    from benchmarks import scale

    scale.main(["--quick"])
    out = capsys.readouterr().out
    assert "ours: Lanczos (streamed)" in out and "ours: Hutch++" in out and "single tensor" in out


def test_scoring_libraries_benchmark_quick(capsys):
    from benchmarks import scoring_libraries

    scoring_libraries.main(["--quick"])
    out = capsys.readouterr().out
    assert "scipy.stats.bootstrap" in out and "bit-equal" in out
