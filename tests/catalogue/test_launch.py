"""The entry point: ``list`` and ``show`` replay a stored run exactly, and only while their inputs are unchanged."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from catalogue import launch

RECORDS = Path(__file__).resolve().parents[2] / "report" / "records"
CLAIM = "lyu2022.effective-lr-identity"


@pytest.fixture
def records(tmp_path):
    """Two committed records in a directory of their own."""
    directory = tmp_path / "records"
    directory.mkdir()
    for name in (f"{CLAIM}.json", "wen2023.trace-identity.json"):
        shutil.copy(RECORDS / name, directory / name)
    return directory


@pytest.fixture
def cache(tmp_path, monkeypatch):
    directory = tmp_path / "cache"
    monkeypatch.setenv("FLATNESS_CATALOGUE_CACHE", str(directory))
    return directory


def test_a_replay_prints_what_the_run_printed_without_importing_torch(records, cache, tmp_path):
    line = [
        sys.executable,
        "-c",
        "import sys; from catalogue.launch import main; c = main(sys.argv[1:]); "
        "print('torch' in sys.modules, c, file=sys.stderr)",
        "list",
        "--results",
        str(records),
    ]
    env = {**__import__("os").environ, "FLATNESS_CATALOGUE_CACHE": str(cache)}
    first = subprocess.run(line, capture_output=True, text=True, env=env, cwd=tmp_path, check=True)
    again = subprocess.run(line, capture_output=True, text=True, env=env, cwd=tmp_path, check=True)
    assert first.stderr.endswith("True 0\n") and again.stderr.endswith("False 0\n")
    assert again.stdout == first.stdout and CLAIM in again.stdout
    assert again.stderr.removesuffix("False 0\n") == first.stderr.removesuffix("True 0\n")


def test_the_key_follows_every_input(records, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = ["list", "--results", str(records)]
    key = launch.output_key(line)
    assert key == launch.output_key(list(line))  # a function of its inputs
    assert launch.output_key(["list", f"--results={records}"]) != key  # the line itself is an input
    record = records / f"{CLAIM}.json"
    record.write_bytes(record.read_bytes().replace(b'"holds"', b'"refuted"', 1))
    assert launch.output_key(line) != key  # an edited record
    assert launch.output_key(["show", CLAIM]) != launch.output_key(["show", "wen2023.trace-identity"])


@pytest.mark.parametrize(
    "argv",
    [["run", "--all"], ["report"], ["list", "--plugin", "claims.py"], ["list", "--help"], []],
)
def test_other_commands_plugins_and_help_are_never_replayed(argv):
    assert launch.output_key(argv) is None


def test_usage_errors_are_not_stored_and_off_disables(cache, capsys, monkeypatch):
    assert launch.main(["show", "nobody.no-such-claim"]) == 2
    assert not cache.exists() or not list(cache.glob("*.json"))
    monkeypatch.setenv("FLATNESS_CATALOGUE_CACHE", "off")
    assert launch.cache_dir() is None
