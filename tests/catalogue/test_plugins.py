"""Claims from outside the package: a --plugin file and an installed entry point."""

import importlib.metadata
import sys
from pathlib import Path

import pytest

from catalogue import cli, registry

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "my_claims.py"


@pytest.fixture
def clean_registry(monkeypatch):
    """Plugins registered by a test leave the registry as it was."""
    registry.all_claims()
    monkeypatch.setattr(registry, "_CLAIMS", dict(registry._CLAIMS))
    monkeypatch.setattr(registry, "_PLUGIN_FILES", dict(registry._PLUGIN_FILES))
    for name in [m for m in sys.modules if m.startswith(registry.PLUGIN_PACKAGE)]:
        monkeypatch.delitem(sys.modules, name)


def test_a_plugin_claim_runs_with_its_control_and_reaches_list_and_report(tmp_path, clean_registry, capsys):
    out = tmp_path / "records"
    plugin = ["--plugin", str(EXAMPLE)]
    code = cli.main(
        ["run", *plugin, "mine.euler-homogeneity", "--quick", "--controls", "--jobs", "2", "--out", str(out)]
    )
    assert code == 0
    assert {p.name for p in out.glob("*.json")} == {"mine.euler-homogeneity.json", "mine.euler-homogeneity~bias.json"}
    capsys.readouterr()
    assert cli.main(["list", *plugin, "--family", "mine", "--results", str(out)]) == 0
    assert "mine.euler-homogeneity" in capsys.readouterr().out
    report = tmp_path / "REPORT.md"
    assert cli.main(["report", *plugin, "--results", str(out), "--out", str(report)]) == 0
    text = report.read_text()
    assert "euler-homogeneity" in text and "refuted" in text  # the claim and its control's verdict
    assert '<a id="mine-euler-homogeneity"></a>' in text  # a plugin's anchor cannot shadow a built-in slug
    assert cli.main(["verify", *plugin, str(out)]) == 0


def test_editing_the_plugin_file_makes_its_records_stale(tmp_path, clean_registry, capsys):
    plugin = tmp_path / "claims.py"
    plugin.write_text(EXAMPLE.read_text())
    out = tmp_path / "records"
    assert cli.main(["run", "--plugin", str(plugin), "mine.euler-homogeneity", "--quick", "--out", str(out)]) == 0
    plugin.write_text(plugin.read_text() + "\n# an edit\n")
    capsys.readouterr()
    cli.main(["verify", "--plugin", str(plugin), str(out)])
    assert "stale" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("raise RuntimeError('broken on import')", "RuntimeError: broken on import"),
        (EXAMPLE.read_text().replace("mine.euler", "dinh2017.euler"), "must not be a built-in one"),
    ],
)
def test_a_bad_plugin_is_one_line_and_exit_2(tmp_path, clean_registry, capsys, text, message):
    plugin = tmp_path / "bad.py"
    plugin.write_text(text)
    assert cli.main(["list", "--plugin", str(plugin)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not any(c.id.endswith("euler-homogeneity") for c in registry.all_claims())  # nothing half-registered


def test_a_missing_plugin_file_is_exit_2(clean_registry, capsys):
    assert cli.main(["run", "--plugin", "no/such/claims.py", "--all"]) == 2
    assert "is not a Python file" in capsys.readouterr().err


def test_an_installed_entry_point_is_found_without_flags(tmp_path, monkeypatch, clean_registry):
    package = tmp_path / "site"
    package.mkdir()
    (package / "installed_claims.py").write_text(EXAMPLE.read_text().replace("mine.", "installed."))
    monkeypatch.syspath_prepend(str(package))
    entry = importlib.metadata.EntryPoint(name="installed", value="installed_claims", group=registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [entry] if group == entry.group else [])
    monkeypatch.setattr(registry, "_loaded", False)
    claim = registry.get("installed.euler-homogeneity")
    assert "installed" in registry.families()
    from catalogue import provenance

    files = provenance.code_files(claim.check.__module__)
    assert any(p.endswith("installed_claims.py") for p in files)  # its code is in its records' hash
