"""Records on disk: one JSON file per claim, written atomically (temp file + rename)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from pydantic import ValidationError

from catalogue.claim import Record

__all__ = ["record_path", "write_record", "read_record", "load_records", "atomic_write_text"]


def record_path(out_dir: Path | str, claim_id: str) -> Path:
    return Path(out_dir) / f"{claim_id}.json"


def atomic_write_text(path: Path | str, text: str) -> None:
    """Write ``text`` so that ``path`` holds either the old or the new content, never a torn file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; records and reports are for everyone to read
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_record(out_dir: Path | str, record: Record) -> Path:
    path = record_path(out_dir, record.claim_id)
    atomic_write_text(path, json.dumps(record.model_dump(mode="json"), indent=2, allow_nan=False) + "\n")
    return path


def read_record(path: Path | str) -> Record | None:
    """The record at ``path``, or None if it is missing or not a valid record."""
    try:
        return Record.model_validate_json(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValidationError, ValueError):
        return None


def load_records(out_dir: Path | str) -> dict[str, Record]:
    """Every valid record in ``out_dir`` by claim id (invalid files are skipped)."""
    records = {}
    for path in sorted(Path(out_dir).glob("*.json")):
        record = read_record(path)
        if record is not None:
            records[record.claim_id] = record
    return records
