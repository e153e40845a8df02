"""The record of one claim's run, as stored on disk (``<records>/<claim_id>.json``).

Kept apart from :mod:`catalogue.claim`: the claims import that module, so its source is part of
every claim's code hash, and the record's bookkeeping fields must be able to change without
making every stored record stale.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from catalogue.claim import ClaimKind, Figure, Source, Table, Verdict
from catalogue.rules import Check

__all__ = ["Record", "SeedRun", "RecordVerdict", "Mode", "CONTENT_FIELDS"]

RecordVerdict = Literal["holds", "refuted", "inconclusive", "error"]
Mode = Literal["quick", "full", "paper", "custom"]
CONTENT_FIELDS = ("verdict", "evidence", "thresholds", "checks", "figures", "tables", "notes", "error", "seeds")


class SeedRun(BaseModel):
    """One seed of a pooled run: its verdict and the numbers its rule compared."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seed: int
    verdict: RecordVerdict
    values: dict[str, Any] = Field(default_factory=dict, description="each checked quantity's value at this seed")
    error: str | None = None


class Record(BaseModel):
    """One claim's stored result (``<out>/<claim_id>.json``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    claim_id: str
    family: str
    title: str
    statement: str
    source: Source
    source_verdict: Verdict
    kind: ClaimKind | None = Field(default=None, description="identity, construction or empirical (the registry's)")
    control: str | None = Field(
        default=None, description="the negative control this record ran (None: the claim itself)"
    )
    verdict: RecordVerdict
    agrees: bool = Field(description="the verdict is the source's (a control's: the verdict it should have)")
    evidence: dict[str, Any]
    thresholds: dict[str, Any]
    checks: list[Check] = Field(default_factory=list, description="the declared rule applied, one per threshold")
    seeds: list[SeedRun] = Field(
        default_factory=list,
        description="every seed of a pooled run (the verdict pools them; evidence, checks and figures are the first "
        "seed's); empty for a single-seed run",
    )
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
        # a record without a declared rule (no checks) or of one seed (no seeds) hashes as it always did
        return {k: data[k] for k in CONTENT_FIELDS if k not in ("checks", "seeds") or data[k]}
