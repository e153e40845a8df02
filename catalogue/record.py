"""The record of one claim's run, as stored on disk (``<records>/<claim_id>.json``).

Kept apart from :mod:`catalogue.claim`: the claims import that module, so its source is part of
every claim's code hash, and the record's bookkeeping fields must be able to change without
making every stored record stale.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from catalogue.claim import Figure, Source, Table, Verdict
from catalogue.rules import Check

__all__ = ["Record", "RecordVerdict", "Mode", "CONTENT_FIELDS"]

RecordVerdict = Literal["holds", "refuted", "inconclusive", "error"]
Mode = Literal["quick", "full", "paper", "custom"]
CONTENT_FIELDS = ("verdict", "evidence", "thresholds", "checks", "figures", "tables", "notes", "error")


class Record(BaseModel):
    """One claim's stored result (``<out>/<claim_id>.json``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    claim_id: str
    family: str
    title: str
    statement: str
    source: Source
    source_verdict: Verdict
    verdict: RecordVerdict
    agrees: bool
    evidence: dict[str, Any]
    thresholds: dict[str, Any]
    checks: list[Check] = Field(default_factory=list, description="the declared rule applied, one per threshold")
    figures: list[Figure] = Field(default_factory=list)
    tables: list[Table] = Field(default_factory=list)
    notes: str = ""
    expected_failure: str | None = None
    error: str | None = None
    spec: dict[str, Any]
    spec_hash: str
    seed: int
    mode: Mode
    seconds: float
    versions: dict[str, str]
    created_at: str
    platform: dict[str, str] = Field(
        default_factory=dict, description="the machine and CPU kernel paths of the run (catalogue.kernels)"
    )
    code_hash: str = Field(description="sha256 over code_files: the source the claim's numbers came from")
    code_files: dict[str, str] = Field(description="sha256 of each project file the claim's module imports")
    content_hashes: dict[str, str] = Field(description="sha256 of each evidence number and record part (edits)")

    def content(self) -> dict[str, Any]:
        """What the claim computed (the parts ``content_hashes`` covers), as JSON."""
        data = self.model_dump(mode="json", include=set(CONTENT_FIELDS))
        # a record of a claim without a declared rule has no checks and hashes as it always did
        return {k: data[k] for k in CONTENT_FIELDS if k != "checks" or data[k]}
