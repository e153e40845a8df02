"""The ``catalogue`` command's entry point: ``list`` and ``show`` start without torch when they can.

A cold ``catalogue list`` imports torch and every claim module and checks every record (about 3 s
on 2 cores), yet its output is a function of a few inputs only: the command line, the working
directory, the project's Python files (the claims and all they import), and the ``*.json`` files
of the records directory it reads. This module hashes those inputs (a few milliseconds) and, when
the hash matches a stored run, replays that run's stdout, stderr and exit code instead of
importing anything. Any other command, and any run whose inputs it cannot hash completely
(``--plugin`` files may import modules beside them; installed entry-point claims live outside the
project), goes straight to :func:`catalogue.cli.main`.

The store is ``$FLATNESS_CATALOGUE_CACHE`` (``off`` disables it), else
``$XDG_CACHE_HOME/flatness-catalogue/output`` (``~/.cache`` by default); it keeps the newest
``KEEP`` runs. Nothing in it is evidence: deleting it only costs the next start.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import sys
from importlib.metadata import entry_points
from pathlib import Path

from catalogue.provenance import PACKAGES  # every package a claim can import (stdlib-only module)

__all__ = ["CACHED_COMMANDS", "cache_dir", "main", "output_key"]

CACHED_COMMANDS = ("list", "show")
DEFAULT_RECORDS = "report/records"  # cli.RECORDS, named here so the key needs no import of the cli
KEEP = 64
_ROOT = Path(__file__).resolve().parent.parent


def cache_dir() -> Path | None:
    """Where replayable outputs are kept (None: caching is off)."""
    chosen = os.environ.get("FLATNESS_CATALOGUE_CACHE")
    if chosen == "off":
        return None
    if chosen:
        return Path(chosen)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "flatness-catalogue" / "output"


def output_key(argv: list[str]) -> str | None:
    """sha256 of everything the output of ``catalogue *argv`` depends on; None when not replayable."""
    if not argv or argv[0] not in CACHED_COMMANDS:
        return None
    if any(a in ("-h", "--help") or a.startswith("--plugin") for a in argv):
        return None
    if entry_points(group="flatness_catalogue.claims"):
        return None
    digest = hashlib.sha256()

    def feed(*parts: str | bytes) -> None:
        for part in parts:
            data = part if isinstance(part, bytes) else part.encode("utf-8", "surrogateescape")
            digest.update(len(data).to_bytes(8, "little") + data)

    terminal = shutil.get_terminal_size()
    feed(json.dumps([sys.version, sys.prefix, os.getcwd(), terminal.columns, argv]))
    for package in PACKAGES:
        for file in sorted((_ROOT / package).rglob("*.py")):
            feed(file.relative_to(_ROOT).as_posix(), file.read_bytes())
    tokens = [DEFAULT_RECORDS] + [part for a in argv[1:] for part in a.split("=", 1)]
    for token in tokens:  # a records directory (or any file) named on the line joins the key
        path = Path(token)
        if path.is_dir():
            for entry in sorted(path.glob("*.json")):  # what store.scan reads
                feed(entry.name, entry.read_bytes() if entry.is_file() and not entry.is_symlink() else b"\0not-a-file")
        elif path.is_file():
            feed(token, path.read_bytes())
    return digest.hexdigest()


def _replay(directory: Path, key: str) -> int | None:
    try:
        stored = json.loads((directory / f"{key}.json").read_text(encoding="utf-8"))
        out, err, code = stored["stdout"], stored["stderr"], int(stored["code"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    sys.stdout.write(out)
    sys.stderr.write(err)
    return code


class _Tee(io.TextIOBase):
    """Writes to a stream and keeps a copy."""

    def __init__(self, stream):
        self.stream, self.copy = stream, io.StringIO()

    def write(self, text: str) -> int:
        self.copy.write(text)
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()


def _store(directory: Path, key: str, out: str, err: str, code: int) -> None:
    from catalogue.atomic import atomic_write_text

    try:
        directory.mkdir(parents=True, exist_ok=True)
        atomic_write_text(directory / f"{key}.json", json.dumps({"stdout": out, "stderr": err, "code": code}))
        kept = sorted(directory.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in kept[KEEP:]:
            old.unlink(missing_ok=True)
    except OSError:  # a read-only home only costs the next start
        pass


def main(argv: list[str] | None = None) -> int:
    """Replay ``list``/``show`` when their inputs are unchanged; otherwise run :func:`catalogue.cli.main`."""
    argv = sys.argv[1:] if argv is None else list(argv)
    directory = cache_dir()
    key = output_key(argv) if directory is not None else None
    if key is not None:
        replayed = _replay(directory, key)
        if replayed is not None:
            return replayed
    from catalogue.cli import main as run

    if key is None:
        return run(argv)
    out, err = _Tee(sys.stdout), _Tee(sys.stderr)
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(argv)
    if code in (0, 1):  # a usage error (2) or an interrupt is not an output worth replaying
        _store(directory, key, out.copy.getvalue(), err.copy.getvalue(), code)
    return code


if __name__ == "__main__":
    sys.exit(main())
