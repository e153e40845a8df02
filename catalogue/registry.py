"""Every claim by id, collected from the modules of ``catalogue.claims``."""

from __future__ import annotations

import difflib
import importlib
import pkgutil
import re
from collections.abc import Callable
from typing import Any

from catalogue.claim import FAMILIES, KINDS, MODES, Claim, ClaimKind, Control, Source, Verdict
from catalogue.rules import Rule
from constructions.specs import Spec

__all__ = ["register", "get", "all_claims", "UnknownClaim", "CLAIM_ID"]

CLAIM_ID = re.compile(r"^[a-z0-9]+\.[a-z0-9][a-z0-9-]*$")
CONTROL_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_CLAIMS: dict[str, Claim] = {}
_loaded = False


class UnknownClaim(KeyError):
    """An id that no claim has; the message lists the close matches."""

    def __str__(self) -> str:
        return str(self.args[0])


def register(
    *,
    id: str,
    title: str,
    statement: str,
    kind: ClaimKind,
    source: Source,
    source_verdict: Verdict,
    params: type[Spec],
    quick: dict[str, Any],
    full: dict[str, Any],
    expected_failure: str | dict[str, str] | None = None,
    expected_failure_modes: tuple[str, ...] = ("quick", "full"),
    parallel: bool = False,
    paper: dict[str, Any] | None = None,
    rule: Rule | None = None,
    controls: tuple[Control, ...] = (),
    seeds: int = 1,
) -> Callable:
    """Decorator registering ``check(params, ctx) -> Outcome`` as a claim.

    ``quick``, ``full`` and ``paper`` (the source's budget, where it differs from full) are
    validated into ``params`` at import time, so a claim with a bad parameter set never registers.
    ``rule`` declares how the verdict follows from the check's evidence (:mod:`catalogue.rules`).
    ``kind`` is one of identity, construction, empirical; ``controls`` are the claim's negative
    controls, each applied to the quick and full specs here so that a bad one never registers.
    ``seeds`` independent user seeds are pooled into the full-mode verdict.
    """

    def decorate(check: Callable) -> Callable:
        if not CLAIM_ID.match(id) or id.split(".")[0] not in FAMILIES:
            raise ValueError(f"claim id {id!r} must be <family>.<slug> with family in {FAMILIES}")
        if id in _CLAIMS:
            raise ValueError(f"claim id {id!r} registered twice")
        # one reason per mode: the modes are its keys
        modes = tuple(expected_failure) if isinstance(expected_failure, dict) else expected_failure_modes
        if not modes or not set(modes) <= set(MODES):
            raise ValueError(f"{id}: expected_failure_modes must name some of {MODES}, got {modes!r}")
        if seeds < 1:
            raise ValueError(f"{id}: seeds must be at least 1, got {seeds}")
        if kind not in KINDS:
            raise ValueError(f"{id}: kind must be one of {KINDS}, got {kind!r}")
        names = [c.name for c in controls]
        if len(set(names)) != len(names) or not all(CONTROL_NAME.match(n) for n in names):
            raise ValueError(f"{id}: control names must be distinct lowercase slugs, got {names}")
        specs = {mode: params.model_validate(values) for mode, values in (("quick", quick), ("full", full))}
        for control in controls:
            for mode, spec in specs.items():
                try:
                    control.apply(spec)
                except ValueError as exc:
                    raise ValueError(
                        f"{id}: control {control.name!r} does not apply to the {mode} spec: {exc}"
                    ) from None
        _CLAIMS[id] = Claim(
            id=id,
            title=title,
            statement=statement,
            source=source,
            source_verdict=source_verdict,
            params=params,
            quick=specs["quick"],
            full=specs["full"],
            check=check,
            expected_failure=expected_failure,
            expected_failure_modes=modes,
            parallel=parallel,
            paper=None if paper is None else params.model_validate(paper),
            rule=rule,
            kind=kind,
            controls=tuple(controls),
            seeds=seeds,
        )
        return check

    return decorate


def _load() -> None:
    global _loaded
    if _loaded:
        return
    import catalogue.claims as package

    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        importlib.import_module(f"{package.__name__}.{info.name}")
    _loaded = True


def all_claims(family: str | None = None) -> list[Claim]:
    """Registered claims sorted by id, optionally of one family."""
    _load()
    claims = sorted(_CLAIMS.values(), key=lambda c: c.id)
    return [c for c in claims if family is None or c.family == family]


def get(claim_id: str) -> Claim:
    """The claim with this id; :class:`UnknownClaim` (with close matches) otherwise."""
    _load()
    if claim_id in _CLAIMS:
        return _CLAIMS[claim_id]
    close = difflib.get_close_matches(claim_id, list(_CLAIMS), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else "; `catalogue list` shows them all"
    raise UnknownClaim(f"unknown claim id {claim_id!r}{hint}")
