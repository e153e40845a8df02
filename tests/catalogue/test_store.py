import json

import pytest

from catalogue import atomic, store


def test_atomic_write_keeps_old_content_on_failure(tmp_path, monkeypatch):
    path = tmp_path / "x.json"
    atomic.atomic_write_text(path, "old")

    def broken_fsync(fd):
        raise OSError("disk full")

    monkeypatch.setattr(atomic.os, "fsync", broken_fsync)
    with pytest.raises(OSError):
        atomic.atomic_write_text(path, "new")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]  # no temp file left behind


def test_invalid_record_files_are_skipped(tmp_path):
    (tmp_path / "a.json").write_text("{not json")
    (tmp_path / "b.json").write_text(json.dumps({"claim_id": "x"}))
    assert store.load_records(tmp_path) == {}
