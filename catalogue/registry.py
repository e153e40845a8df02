"""Every claim by id, collected from the modules of ``catalogue.claims`` and from plugins.

A plugin is a Python file (``catalogue run --plugin path/to/claims.py``) or an installed module
named by an entry point of the group ``flatness_catalogue.claims``; importing it registers its
claims with the same :func:`register` decorator. A plugin's families are its own: it may not add
claims to the built-in families (a built-in claim's family is its module's name).
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
import importlib.util
import pkgutil
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from catalogue import provenance
from catalogue.claim import KINDS, MODES, Claim, ClaimKind, Control, Source, Verdict
from catalogue.rules import Rule
from constructions.specs import Spec

__all__ = [
    "register",
    "get",
    "all_claims",
    "families",
    "load_plugin",
    "plugin_file",
    "UnknownClaim",
    "PluginError",
    "CLAIM_ID",
    "ENTRY_POINT_GROUP",
]

ENTRY_POINT_GROUP = "flatness_catalogue.claims"
PLUGIN_PACKAGE = "catalogue_plugins"  # plugin files are imported as catalogue_plugins.<stem>_<hash>

CLAIM_ID = re.compile(r"^[a-z0-9][a-z0-9_]*\.[a-z0-9][a-z0-9-]*$")
CONTROL_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_CLAIMS: dict[str, Claim] = {}
_PLUGIN_FILES: dict[str, Path] = {}  # module name → file, for workers that must load it again
_loaded = False


class UnknownClaim(KeyError):
    """An id that no claim has; the message lists the close matches."""

    def __str__(self) -> str:
        return str(self.args[0])


class PluginError(ValueError):
    """A plugin that cannot be found, imported or registered (one line, names the plugin)."""


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
        built_in = check.__module__.startswith("catalogue.claims.")
        if not CLAIM_ID.match(id):
            raise ValueError(
                f"claim id {id!r} must be <family>.<slug>: lowercase letters and digits, with underscores in the "
                "family and hyphens in the slug"
            )
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
        family = id.split(".")[0]  # checked last: the errors above say more
        if built_in:
            module = check.__module__.rpartition(".")[2]
            if module != family and not module.startswith(f"{family}_"):
                raise ValueError(f"claim id {id!r}: a built-in claim's family is its module's name, {module!r}")
        else:
            _load()  # the built-in families first, whoever imported this plugin
            taken = {c.family for c in _CLAIMS.values() if c.check.__module__.startswith("catalogue.claims.")}
            if family in taken:
                raise ValueError(f"claim id {id!r}: the family of a plugin claim must not be a built-in one")
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
    for entry in sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        try:
            module = entry.load()
            if getattr(module, "__file__", None):  # an entry point naming a module: hash its file
                provenance.add_external_module(module.__name__, Path(module.__file__))
        except Exception as exc:  # a broken installed plugin must not take the built-in claims with it
            print(
                f"warning: plugin entry point {entry.name!r} ({entry.value}) not loaded: {type(exc).__name__}: {exc}",
                file=sys.stderr,
            )


def load_plugin(path: str | Path) -> str:
    """Import a claims file as a plugin (once per file); returns its module name.

    The file's claims register as it is imported; its hash joins their records' code (with the
    project modules it imports), so an edit to the file makes their records stale.
    """
    _load()
    file = Path(path).expanduser().resolve()
    for name, known in _PLUGIN_FILES.items():
        if known == file:
            return name
    if not file.is_file() or file.suffix != ".py":
        raise PluginError(f"--plugin: {path} is not a Python file")
    name = f"{PLUGIN_PACKAGE}.{re.sub(r'[^0-9a-zA-Z_]', '_', file.stem)}_{provenance.digest(str(file))[:8]}"
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    before = set(_CLAIMS)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        for claim_id in set(_CLAIMS) - before:  # nothing half-registered stays behind
            del _CLAIMS[claim_id]
        raise PluginError(f"--plugin {path}: {type(exc).__name__}: {exc}") from None
    _PLUGIN_FILES[name] = file
    provenance.add_external_module(name, file)
    return name


def plugin_file(claim: Claim) -> Path | None:
    """The file of the plugin that registered ``claim`` (None for built-in and entry-point claims)."""
    return _PLUGIN_FILES.get(claim.check.__module__)


def families() -> list[str]:
    """Every registered family, sorted (``catalogue.families.FAMILIES`` orders the built-in ones for show)."""
    _load()
    return sorted({c.family for c in _CLAIMS.values()})


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
