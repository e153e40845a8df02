"""``catalogue verify``: are the stored records what the current code computes?

Each record file is checked as :mod:`catalogue.store` reads it (current / stale / edited /
invalid). With a rerun, chosen claims run again in their records' own mode, spec and seed, in a
fresh directory (no cache or checkpoint is reused), and every number is compared with the stored
one (paper-budget records, hours each, and negative controls' records are checked but not rerun):

- the verdict and the error message must be equal;
- every number of the evidence, thresholds, checks, tables and figures must be equal bit for bit (each
  claim runs single-threaded from seeds derived from its spec, so a rerun on the same library
  versions repeats every operation), except a number ``x`` reported with its own error (a sibling
  ``x_stderr``, ``x_err`` or ``x_se``), which may move by at most twice that error;
- with ``rtol`` (``--rtol``), any number may also move by ``rtol · max(|x|, |y|)``: for reruns on
  another CPU vendor, where oneMKL ignores the pinned kernel branch (``catalogue.kernels``) and
  round-off differs; the verdict must still be equal;
- wall-clock times (keys ``seconds`` or ``*_seconds``) are not compared;
- strings are compared after the rerun directory is replaced by the records directory (paths of
  per-model tables).
"""

from __future__ import annotations

import math
import random
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from catalogue import registry, runner, seeding, store
from catalogue.record import Record

__all__ = ["Verification", "verify_records", "compare_records", "choose_reruns", "ERROR_SUFFIXES"]

ERROR_SUFFIXES = ("_stderr", "_err", "_se")


@dataclass
class Verification:
    """One record file's verification: its status, and the rerun's outcome when it was rerun."""

    path: Path
    claim_id: str
    status: store.Status
    detail: str = ""
    rerun: str | None = None  # "reproduced", "differs" or "error"
    differences: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "current" and self.rerun in (None, "reproduced")

    def row(self) -> dict[str, Any]:
        return {
            "file": self.path.name,
            "claim": self.claim_id,
            "status": self.status,
            "detail": self.detail,
            "rerun": self.rerun,
            "differences": self.differences,
        }


def _is_timing(key: str) -> bool:
    last = key.rsplit(".", 1)[-1].split("[", 1)[0]
    return last == "seconds" or last.endswith("_seconds")


def _leaves(value: Any, prefix: str) -> dict[str, Any]:
    """Dotted keys for dicts, ``[i]`` for lists: every number of a record gets its own key."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_leaves(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(value, list):
        out = {}
        for i, v in enumerate(value):
            out.update(_leaves(v, f"{prefix}[{i}]"))
        return out
    return {prefix: value}


def _allowed_error(key: str, *leaves: dict[str, Any]) -> float:
    errors = [
        abs(v)
        for suffix in ERROR_SUFFIXES
        for leaf in leaves
        if isinstance(v := leaf.get(key + suffix), int | float) and not isinstance(v, bool) and math.isfinite(v)
    ]
    return 2 * max(errors) if errors else 0.0


def compare_records(
    stored: Record, fresh: Record, rerun_dir: Path | None = None, records_dir: Path | None = None, *, rtol: float = 0.0
):
    """Differences between a stored record and a rerun of it, under the module's rule (empty: reproduced)."""
    if stored.verdict != fresh.verdict:
        return [f"verdict: stored {stored.verdict}, now {fresh.verdict}"]
    if stored.error != fresh.error:
        return [f"error: stored {stored.error!r}, now {fresh.error!r}"]
    parts = ("evidence", "thresholds", "checks", "seeds", "tables", "figures")
    a = _leaves(stored.model_dump(mode="json", include=set(parts)), "")
    b = _leaves(fresh.model_dump(mode="json", include=set(parts)), "")
    differences = []
    for key in sorted(a.keys() | b.keys()):
        if _is_timing(key):
            continue
        if key not in a or key not in b:
            differences.append(f"{key}: {'missing now' if key in a else 'new now'}")
            continue
        x, y = a[key], b[key]
        if isinstance(y, str) and rerun_dir is not None and records_dir is not None:
            y = y.replace(str(rerun_dir), str(records_dir))
        if x == y and type(x) is type(y):
            continue
        numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (x, y))
        if numeric and abs(x - y) <= max(_allowed_error(key, a, b), rtol * max(abs(x), abs(y))):
            continue
        differences.append(f"{key}: stored {x!r}, now {y!r}")
    return differences


def _platform_note(stored: dict[str, str], now: dict[str, str]) -> str:
    """Which machine facts differ between a record and its rerun (bits need the same kernel paths)."""
    keys = sorted(k for k in stored.keys() | now.keys() if stored.get(k) != now.get(k))
    moved = ", ".join(f"{k} {stored.get(k, '?')!r} → {now.get(k, '?')!r}" for k in keys)
    return f"platform: the record was computed on other kernel paths ({moved}); see catalogue.kernels"


def _plugin(claim_id: str) -> str | None:
    """The plugin file of a claim registered by ``--plugin`` (its rerun's worker loads it)."""
    file = registry.plugin_file(registry.get(claim_id)) if claim_id in {c.id for c in registry.all_claims()} else None
    return None if file is None else str(file)


def choose_reruns(ids: Sequence[str], rerun: Sequence[str], sample: int, sample_seed: int) -> list[str]:
    """The claims to rerun: the named ones, or a seeded random sample of ``sample`` of ``ids``."""
    if rerun:
        return list(dict.fromkeys(rerun))
    if sample:
        return sorted(random.Random(sample_seed).sample(sorted(ids), min(sample, len(ids))))
    return []


def verify_records(
    results: Path,
    *,
    rerun: Sequence[str] = (),
    sample: int = 0,
    sample_seed: int = 0,
    n_jobs: int = 1,
    on_rerun=None,
    rtol: float = 0.0,
) -> list[Verification]:
    """Check every record file of ``results``; rerun the chosen claims and compare their numbers."""
    scanned = store.scan(results)
    rows = {c.path: Verification(c.path, c.claim_id, c.status, c.reason) for c in scanned.checks}
    # paper-budget records take hours to recompute: they are checked, never rerun here; so are the
    # negative controls' records (a rerun of the claim's own record checks the same code)
    usable = {
        c.record.claim_id: c
        for c in scanned.checks
        if c.record is not None and c.record.mode != "paper" and c.record.control is None
    }
    chosen = choose_reruns(list(usable), rerun, sample, sample_seed)
    missing = [cid for cid in chosen if cid not in usable]
    for cid in missing:
        path = store.record_path(results, cid)
        rows.setdefault(path, Verification(path, cid, "invalid", "no usable record to rerun"))
    jobs = [
        runner.Job(
            cid,
            seeding.canonical_json(usable[cid].record.spec),
            usable[cid].record.mode,
            usable[cid].record.seed,
            seeds=tuple(r.seed for r in usable[cid].record.seeds[1:]),
            plugin=_plugin(cid),
        )
        for cid in chosen
        if cid in usable
    ]
    if jobs:
        with tempfile.TemporaryDirectory(prefix="catalogue-verify-") as tmp:
            fresh = {r.claim_id: r for r in runner.run_jobs(jobs, Path(tmp), n_jobs=n_jobs, on_record=on_rerun)}
            for cid, record in fresh.items():
                check = usable[cid]
                row = rows[check.path]
                differences = compare_records(check.record, record, Path(tmp), Path(results), rtol=rtol)
                row.rerun = "error" if record.verdict == "error" else ("differs" if differences else "reproduced")
                row.differences = differences if record.verdict != "error" else [f"error: {record.error}"]
                if differences and check.record.platform != record.platform:
                    row.differences.insert(0, _platform_note(check.record.platform, record.platform))
    return sorted(rows.values(), key=lambda v: v.path.name)
