"""What a record's numbers depend on: the project's source files a claim imports, and its content.

A claim's *code* is the closure of its module under the project's own imports (``catalogue``,
``constructions``, ``evaluators``; static ``import``/``from … import`` statements anywhere in a
file, function bodies included, and the ``__init__`` of every package on the way). A record stores
the sha256 of each of those files, so a reader can tell which files changed since it was written.

A record's *content* hashes are the sha256 of each flattened evidence number (``sam.test_error``)
and of its verdict, thresholds, figures, tables, notes and error, so an edit names what it changed.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
from pathlib import Path
from typing import Any

__all__ = ["PACKAGES", "ROOT", "add_external_module", "code_files", "changed_files", "content_hashes", "digest"]

PACKAGES = ("catalogue", "constructions", "evaluators")
ROOT = Path(__file__).resolve().parent.parent


def digest(data: bytes | str) -> str:
    """sha256, hex."""
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


_EXTERNAL: dict[str, Path] = {}  # plugin modules (outside the project) by name


def add_external_module(name: str, path: Path) -> None:
    """Hash ``path`` as module ``name``'s code (a plugin's claims file), with its project imports."""
    _EXTERNAL[name] = Path(path).resolve()


def _module_file(name: str) -> Path | None:
    if name in _EXTERNAL:
        return _EXTERNAL[name]
    base = ROOT.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _with_parents(name: str) -> list[str]:
    """``a.b.c`` → ``a``, ``a.b``, ``a.b.c``: importing a submodule runs every package ``__init__``."""
    parts = name.split(".")
    return [".".join(parts[: k + 1]) for k in range(len(parts))]


def _package_of(name: str, path: Path) -> str:
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


@functools.cache
def _imports(name: str) -> tuple[str, ...]:
    """Project modules that module ``name`` imports by name (absolute names)."""
    path = _module_file(name)
    if path is None:
        return ()
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                package = _package_of(name, path).split(".")
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            modules = {f"{base}.{alias.name}" for alias in node.names} & {m for m in _all_modules()}
            # `from pkg import module` imports the module; `from pkg import name` runs pkg itself
            found.update(modules if len(modules) == len(node.names) else {base, *modules})
    return tuple(sorted(m for m in found if m.split(".")[0] in PACKAGES and _module_file(m) is not None))


@functools.cache
def _all_modules() -> frozenset[str]:
    names = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            names.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return frozenset(names)


def code_files(module: str) -> dict[str, str]:
    """``{path relative to the project root: sha256}`` of ``module`` and every project module it
    imports, transitively.

    The ``__init__`` of a package that is only passed through (``a`` when importing ``a.b``) is
    hashed, but its own imports are not followed: they cannot change what ``a.b`` computes.
    Importing from the package itself (``from evaluators import Objective``) follows them.
    """
    followed: set[str] = set()
    passed: set[str] = set()
    todo = [module]
    while todo:
        name = todo.pop()
        if name in followed or _module_file(name) is None:
            continue
        followed.add(name)
        passed.update(_with_parents(name)[:-1])
        todo.extend(_imports(name))
    files = {path for name in followed | passed if (path := _module_file(name)) is not None}
    return {_shown(p): digest(p.read_bytes()) for p in sorted(files)}


def _shown(path: Path) -> str:
    """Project files relative to the project root; a plugin's file by its absolute path."""
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.as_posix()


def changed_files(stored: dict[str, str], current: dict[str, str]) -> list[str]:
    """Files whose hash differs, plus files added to or dropped from the closure."""
    return sorted(p for p in stored.keys() | current.keys() if stored.get(p) != current.get(p))


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def _flat(value: Any, prefix: str) -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flat(v, f"{prefix}.{k}"))
        return out
    return {prefix: value}


def content_hashes(content: dict[str, Any]) -> dict[str, str]:
    """sha256 of each flattened evidence item (``evidence.sam.test_error``) and of each other part.

    ``content`` holds the JSON forms of a record's verdict, evidence, thresholds, figures, tables,
    notes and error.
    """
    items: dict[str, Any] = {}
    for part, value in content.items():
        items.update(_flat(value, part) if part == "evidence" else {part: value})
    return {key: digest(_canonical(value)) for key, value in sorted(items.items())}
