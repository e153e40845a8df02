"""Records on disk: one JSON file per claim, written atomically, read strictly.

A file is accepted as a record only if it is a regular file (no link, no directory) of UTF-8 JSON
with finite numbers that validates against :class:`Record`, its claim id is its file name and a
registered claim's, its family, spec and spec hash are that claim's, and its content hashes match
its content. The statement, title, source and ``agrees`` shown are the registry's, never the file's.
Every file is classified:

- ``current``: valid, and the claim's code is what the record was computed with;
- ``stale``: valid, but files of the claim's code changed since (named in the reason);
- ``edited``: the content (verdict, an evidence number, …) no longer matches its hashes;
- ``invalid``: anything else (the reason says what).

Current and stale records are loaded (stale ones with a warning); edited and invalid files are
left out, each with a warning naming the file and the reason.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from catalogue import provenance, registry, seeding
from catalogue.atomic import atomic_write_text
from catalogue.claim import MODES, Claim, Control
from catalogue.record import Record
from constructions.specs import Spec

__all__ = [
    "Status",
    "PAPER_SUFFIX",
    "CONTROL_SEPARATOR",
    "RecordCheck",
    "Scan",
    "record_name",
    "record_path",
    "write_record",
    "seal",
    "check_record_file",
    "scan",
    "load_records",
    "atomic_write_text",
]

Status = Literal["current", "stale", "edited", "invalid"]


PAPER_SUFFIX = "@paper"
CONTROL_SEPARATOR = "~"


def record_name(claim_id: str, mode: str = "full", control: str | None = None) -> str:
    """``<claim_id>``, ``<claim_id>@paper`` for a paper-budget record (it sits beside the full
    one, so a full run never replaces the hours of a paper one), ``<claim_id>~<control>`` for a
    negative control's record."""
    return claim_id + (PAPER_SUFFIX if mode == "paper" else "") + (f"{CONTROL_SEPARATOR}{control}" if control else "")


def record_path(out_dir: Path | str, claim_id: str, mode: str = "full", control: str | None = None) -> Path:
    return Path(out_dir) / f"{record_name(claim_id, mode, control)}.json"


def seal(record: Record) -> Record:
    """The record with ``content_hashes`` computed from its content."""
    return record.model_copy(update={"content_hashes": provenance.content_hashes(record.content())})


def write_record(out_dir: Path | str, record: Record) -> Path:
    path = record_path(out_dir, record.claim_id, record.mode, record.control)
    data = seal(record).model_dump(mode="json")
    atomic_write_text(path, json.dumps(data, indent=2, allow_nan=False) + "\n")
    return path


# ---------------------------------------------------------------------- strict reading
@dataclass(frozen=True)
class RecordCheck:
    """What reading one file found: its status, why, and the record when it is usable."""

    path: Path
    status: Status
    reason: str = ""
    record: Record | None = None
    changed: tuple[str, ...] = ()  # stale: the code files changed since the record was written

    @property
    def claim_id(self) -> str:
        if self.record:
            return self.record.claim_id
        return self.path.stem.split(CONTROL_SEPARATOR)[0].removesuffix(PAPER_SUFFIX)

    def warning(self) -> str:
        return f"{self.path}: {self.status}: {self.reason}"


def _reject_constant(name: str):
    raise ValueError(f"non-finite number {name} in JSON")


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]) or "record"
    more = f" (and {len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
    return f"{loc}: {err['msg']}{more}"


def check_record_file(path: Path | str) -> RecordCheck:
    """Classify one file (see the module docstring); never raises for a bad file."""
    path = Path(path)

    def invalid(reason: str) -> RecordCheck:
        return RecordCheck(path, "invalid", reason)

    if path.is_symlink():
        return invalid("a symbolic link, not a record file")
    if path.is_dir():
        return invalid("a directory, not a record file")
    if not path.is_file():
        return invalid("not a regular file")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        return invalid(f"unreadable: {exc.strerror or exc}")
    if not raw.strip():
        return invalid("empty file")
    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError:
        return invalid("not UTF-8 text")
    except ValueError as exc:  # JSONDecodeError is a ValueError; so is a NaN literal
        return invalid(f"not valid JSON ({exc})" if "non-finite" not in str(exc) else str(exc))
    if not isinstance(data, dict):
        return invalid(f"not a record (a JSON {type(data).__name__})")
    try:
        record = Record.model_validate(data)
    except ValidationError as exc:
        return invalid(f"not a record: {_first_error(exc)}")
    expected = record_path(path.parent, record.claim_id, record.mode, record.control).name
    if path.name != expected:
        what = f"{record.mode} mode" + (f", control {record.control!r}" if record.control else "")
        return invalid(f"claim id {record.claim_id!r} ({what}) belongs in {expected!r}, not {path.name!r}")
    try:
        claim = registry.get(record.claim_id)
    except registry.UnknownClaim as exc:
        return invalid(f"unregistered claim: {exc}")
    if record.family != claim.family:
        return invalid(f"family {record.family!r} is not {claim.id}'s ({claim.family!r})")
    try:
        params = claim.params.model_validate(record.spec)
    except ValidationError as exc:
        return invalid(f"spec is not {claim.id}'s parameters: {_first_error(exc)}")
    expected = seeding.spec_hash({"claim": claim.id, "params": params.model_dump(mode="json")})
    # a spec that hashes as stored but not as the claim's parameters read it now: the parameters
    # gained a field (or a default) since, which makes the record stale, not corrupt
    schema_changed = record.spec_hash != expected and record.spec_hash == seeding.spec_hash(
        {"claim": claim.id, "params": record.spec}
    )
    if record.spec_hash != expected and not schema_changed:
        return invalid("spec_hash does not match the claim id and spec")
    if record.mode == "paper" and claim.paper is None:
        return invalid(f"{claim.id} has no paper budget, yet the record says mode paper")
    control = None
    if record.control is not None:
        try:
            control = claim.control(record.control)
        except KeyError as exc:
            return invalid(str(exc.args[0]))
        if record.mode == "paper":
            return invalid("controls run in quick, full or custom mode, not at the paper budget")
    if record.code_hash != provenance.digest(seeding.canonical_json(record.code_files)):
        return invalid("code_hash does not match code_files")
    now = provenance.content_hashes(record.content())
    edited = provenance.changed_files(record.content_hashes, now)
    if edited:
        shown = ", ".join(edited[:5]) + (f" and {len(edited) - 5} more" if len(edited) > 5 else "")
        return RecordCheck(path, "edited", f"changed since it was computed: {shown}")
    record = record.model_copy(  # what the reader sees about the claim comes from the registry
        update={
            "title": claim.title,
            "statement": claim.statement,
            "source": claim.source,
            "source_verdict": claim.source_verdict,
            "kind": claim.kind,
            "agrees": control.came_out(record.verdict) if control else record.verdict == claim.source_verdict,
        }
    )
    changed = provenance.changed_files(record.code_files, provenance.code_files(claim.check.__module__))
    if schema_changed:
        reason = "the claim's parameters changed since (a field or a default was added)"
        return RecordCheck(path, "stale", reason, record, tuple(changed))
    if record.mode in MODES and params != _spec_of(claim, record.mode, control):
        return RecordCheck(path, "stale", f"the claim's {record.mode}-mode spec changed since", record, tuple(changed))
    if changed:
        shown = ", ".join(changed[:6]) + (f" and {len(changed) - 6} more" if len(changed) > 6 else "")
        return RecordCheck(path, "stale", f"code changed since it was computed: {shown}", record, tuple(changed))
    return RecordCheck(path, "current", "", record)


def _spec_of(claim: Claim, mode: str, control: Control | None) -> Spec:
    """The spec a record of ``mode`` (and ``control``) must have to be current."""
    spec = claim.spec_for(mode)
    return control.apply(spec) if control is not None else spec


@dataclass
class Scan:
    """Every ``*.json`` file of a records directory, checked."""

    directory: Path
    checks: list[RecordCheck] = field(default_factory=list)

    @property
    def records(self) -> dict[str, Record]:
        """Current and stale records by claim id (edited and invalid files are left out), paper
        budgets apart (see :attr:`paper_records`)."""
        return {c.record.claim_id: c.record for c in self._usable() if c.record.mode != "paper"}

    @property
    def paper_records(self) -> dict[str, Record]:
        """Current and stale records at the source's budget (``mode: paper``) by claim id."""
        return {c.record.claim_id: c.record for c in self._usable() if c.record.mode == "paper"}

    @property
    def control_records(self) -> dict[tuple[str, str], Record]:
        """Current and stale negative-control records by (claim id, control name)."""
        return {
            (c.record.claim_id, c.record.control): c.record
            for c in self.checks
            if c.record is not None and c.record.control is not None
        }

    def _usable(self) -> list[RecordCheck]:
        return [c for c in self.checks if c.record is not None and c.record.control is None]

    @property
    def warnings(self) -> list[str]:
        return [c.warning() for c in self.checks if c.status != "current"]


def scan(out_dir: Path | str) -> Scan:
    """Check every ``*.json`` entry of ``out_dir`` (not its subdirectories: caches live there)."""
    out_dir = Path(out_dir)
    paths = sorted(out_dir.glob("*.json")) if out_dir.is_dir() else []
    return Scan(out_dir, [check_record_file(p) for p in paths])


def load_records(out_dir: Path | str) -> dict[str, Record]:
    """Current and stale records in ``out_dir`` by claim id; see :func:`scan` for the warnings."""
    return scan(out_dir).records
